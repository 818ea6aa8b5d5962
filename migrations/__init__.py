"""Alembic migrations of the service's database (``cpsched db upgrade``)."""
