"""cpsched: an external constraint-programming scheduler for HPC workload managers."""

__version__ = "0.1.0"
