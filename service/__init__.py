"""The cpsched service: the FastAPI daemon, its store, settings and orchestration."""
