"""Start a ``cpsched serve`` process on this machine and stop it: for the README's main
command, the benchmarks and the end-to-end tests, which all need a real service."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from cpsched.errors import CpschedError


class ServiceStartError(CpschedError):
    """The local service did not become ready."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


STOP_WAIT_S = 30


@dataclass
class LocalService:
    config: Path
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None
    serve_args: tuple[str, ...] = ()
    """More ``cpsched serve`` options, e.g. ``("--http", "h11")``."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        command = [
            sys.executable, "-m", "cpsched.cli", "serve",
            "--config", str(self.config), "--port", str(self.port), *self.serve_args,
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ}
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServiceStartError(
                    f"cpsched serve exited with {self.process.returncode}; see {self.log}"
                )
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise ServiceStartError(f"cpsched serve not ready after {timeout} s; see {self.log}")

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers run (crash tests)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM, and SIGKILL if it has not stopped within ``STOP_WAIT_S``: a learned
        predictor's running fit ends first, and its model is stored."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.kill()


def write_config(path: Path, database_url: str, token: str, defaults: dict[str, object]) -> Path:
    lines = [
        f'database_url = "{database_url}"',
        "upgrade_on_start = true",
        "[[tokens]]",
        'name = "local"',
        f'secret = "{token}"',
        "[defaults]",
        *(f"{key} = {_toml(value)}" for key, value in defaults.items()),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


@contextmanager
def local_service(
    workdir: Path,
    *,
    database_url: str | None = None,
    token: str = "local-token",
    serve_args: tuple[str, ...] = (),
    **defaults: object,
) -> Iterator[LocalService]:
    """A running service with its own config (and SQLite file unless a URL is given)."""
    workdir.mkdir(parents=True, exist_ok=True)
    url = database_url or f"sqlite:///{workdir / 'cpsched.db'}"
    config = write_config(workdir / "cpsched.toml", url, token, defaults)
    service = LocalService(config, free_port(), workdir / "service.log", serve_args=serve_args)
    service.start()
    try:
        yield service
    finally:
        service.stop()
