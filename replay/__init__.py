"""Trace replay: SWF reading, machine descriptions, simulation and metrics."""
