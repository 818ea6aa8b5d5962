"""Persistence: SQLAlchemy models, the engine, and the queries the service makes."""
