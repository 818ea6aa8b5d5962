"""cpsched bridge: turns a running Slurm (or PBS) into snapshots and applies decisions.

Light by design: it runs on the controller host and imports only pydantic,
pydantic-settings, typer, rich and httpx (never OR-Tools, scikit-learn or the service).
"""

__all__: list[str] = []
