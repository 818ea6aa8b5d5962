"""The bridge runs on a controller host: it must not pull in the service's heavy stack."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = [
    "ortools",
    "sklearn",
    "numpy",
    "fastapi",
    "sqlalchemy",
    "scipy",
    "pandas",
    "uvicorn",
    "alembic",
    "psycopg",
    "prometheus_client",
]


def test_bridge_cli_imports_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "import slurm_bridge.cli, slurm_bridge.loop, slurm_bridge.pbs, slurm_bridge.factory\n"
        f"print(json.dumps([m for m in {FORBIDDEN!r} if m in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
