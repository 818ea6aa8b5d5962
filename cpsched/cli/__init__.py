"""The ``cpsched`` command line.

The base install (what a controller host gets for the bridge) has none of the packages the
replay and the service need; the command then says which extra to install instead of
failing on an import deep inside.
"""

from __future__ import annotations

import sys

# Modules only the [service] extra installs: a missing one means the extra is missing.
SERVICE_EXTRA_MODULES = frozenset(
    {
        "alembic",
        "fastapi",
        "matplotlib",
        "numpy",
        "ortools",
        "prometheus_client",
        "psycopg",
        "pyarrow",
        "sklearn",
        "sqlalchemy",
        "uvicorn",
    }
)


def main() -> None:
    """Run the ``cpsched`` command; exit 2 with one line when the service extra is missing."""
    try:
        from cpsched.cli.app import main as run
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] not in SERVICE_EXTRA_MODULES:
            raise
        sys.stderr.write(
            f"cpsched: the replay and the service need the [service] extra ({missing.name} is "
            "not installed): pip install 'cpsched[service]'\n"
        )
        raise SystemExit(2) from None
    run()
