"""Throw-away database servers for the tests: a PostgreSQL and a MariaDB of their own.

Each runs from Debian's packages (``postgresql``, ``mariadb-server``) on 127.0.0.1 and a
free port, with its data in a temporary folder, and is stopped and removed at the end, so
that no test depends on a server that happens to run on the machine (or disturbs one).
As root, the servers run as the packages' own users (``postgres``, ``mysql``; else
``nobody``): initdb and mariadbd refuse root. They die with the process that started them
(the parent-death signal), so a killed test run leaves no server behind.

``python -m tests.dbservers`` starts both, prints where, and stops them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

HOST = "127.0.0.1"
START_TIMEOUT = 60.0  # seconds for a server to accept connections (a few on an idle machine)
INIT_TIMEOUT = 120.0  # seconds for initdb / mariadb-install-db
STOP_TIMEOUT = 30.0
PORT_TRIES = 3  # a free port can be taken between choosing it and binding it
PR_SET_PDEATHSIG = 1

POSTGRES_PACKAGE = "postgresql"
MARIADB_PACKAGE = "mariadb-server"
MARIADB_CLIENT_PACKAGE = "mariadb-client"


class Missing(Exception):
    """A server's binaries are not installed; the message says which package to install."""


class StartFailed(Exception):
    """A server is installed but did not start; the message ends with its log's tail."""


@dataclass(frozen=True)
class PostgresServer:
    """A PostgreSQL server the tests may create and drop databases on (user ``postgres``,
    trust authentication, no password)."""

    host: str
    port: int
    user: str = "postgres"
    password: str = ""
    data_dir: Path | None = None  # None for a server given by CPSCHED_TEST_POSTGRES

    @classmethod
    def from_url(cls, url: str) -> PostgresServer:
        """A server given by a ``postgresql://user[:password]@host[:port]/...`` URL."""
        parts = urlsplit(url)
        return cls(
            parts.hostname or HOST,
            parts.port or 5432,
            user=parts.username or "postgres",
            password=parts.password or "",
        )

    def _authority(self) -> str:
        secret = f":{self.password}" if self.password else ""
        return f"{self.user}{secret}@{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        """libpq URL of the ``postgres`` maintenance database (for psycopg.connect)."""
        return f"postgresql://{self._authority()}/postgres"

    def url(self, database: str) -> str:
        """SQLAlchemy URL (psycopg driver) of one database on this server."""
        return f"postgresql+psycopg://{self._authority()}/{database}"


@dataclass(frozen=True)
class MariadbServer:
    """A MariaDB server: user ``root`` with no password over TCP on host:port."""

    host: str
    port: int
    socket: Path
    data_dir: Path
    user: str = "root"

    @property
    def env(self) -> dict[str, str]:
        """The variables the Slurm test bed's start.sh reads."""
        return {"MARIADB_HOST": self.host, "MARIADB_PORT": str(self.port)}


def postgres_bin() -> Path:
    """The directory of Debian's newest PostgreSQL server binaries (initdb, postgres)."""
    found = sorted(
        (initdb.parent for initdb in Path("/usr/lib/postgresql").glob("*/bin/initdb")),
        key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise Missing(
        "PostgreSQL's server is not installed (no /usr/lib/postgresql/*/bin/initdb): "
        f"apt-get install {POSTGRES_PACKAGE}"
    )


def mariadb_bin() -> tuple[Path, Path, Path]:
    """mariadb-install-db, mariadbd and the mariadb client (which the Slurm test bed and
    tests/test_dbservers.py call)."""
    install = shutil.which("mariadb-install-db")
    server = shutil.which("mariadbd") or shutil.which("mariadbd", path="/usr/sbin:/sbin")
    client = shutil.which("mariadb")
    missing = [
        name
        for name, path in [(MARIADB_PACKAGE, server and install), (MARIADB_CLIENT_PACKAGE, client)]
        if not path
    ]
    if not install or not server or not client:
        raise Missing(
            "MariaDB is not installed (mariadb-install-db, mariadbd and the mariadb client): "
            f"apt-get install {' '.join(missing)}"
        )
    return Path(install), Path(server), Path(client)


@contextlib.contextmanager
def postgres() -> Iterator[PostgresServer]:
    """A fresh PostgreSQL on 127.0.0.1 and a free port, for the ``with`` block."""
    bindir = postgres_bin()
    with _server_dir("cpsched-postgres-", ("postgres",)) as (root, account):
        data = root / "data"
        log = root / "server.log"
        _run(
            [
                str(bindir / "initdb"),
                f"--pgdata={data}",
                "--username=postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
            account,
            root / "initdb.log",
        )

        def command(port: int) -> list[str]:
            return [
                str(bindir / "postgres"),
                "-D",
                str(data),
                "-p",
                str(port),
                "-c",
                f"listen_addresses={HOST}",
                "-c",
                "unix_socket_directories=",  # TCP only: no socket path to collide or be long
                "-c",
                "fsync=off",  # thrown away at the end: no need to survive a crash
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ]

        with _serve("PostgreSQL", command, _postgres_ready, account, log, signal.SIGINT) as port:
            yield PostgresServer(HOST, port, data_dir=data)


@contextlib.contextmanager
def mariadb() -> Iterator[MariadbServer]:
    """A fresh MariaDB on 127.0.0.1 and a free port (root, no password), for the block."""
    install, server, _client = mariadb_bin()
    with _server_dir("cpsched-mariadb-", ("mysql",)) as (root, account):
        data = root / "data"
        sock = root / "mysqld.sock"
        _run(
            [
                str(install),
                "--no-defaults",  # not the machine's /etc/mysql: its port, socket, datadir
                f"--datadir={data}",
                "--auth-root-authentication-method=normal",  # root, empty password, over TCP
                "--skip-test-db",
                "--skip-name-resolve",
            ],
            account,
            root / "install.log",
        )

        def command(port: int) -> list[str]:
            return [
                str(server),
                "--no-defaults",
                f"--datadir={data}",
                f"--port={port}",
                f"--bind-address={HOST}",
                f"--socket={sock}",
                f"--pid-file={root / 'mariadbd.pid'}",
                "--skip-name-resolve",
                "--innodb-buffer-pool-size=64M",
                "--innodb-flush-log-at-trx-commit=0",
                "--innodb-doublewrite=0",
            ]

        log = root / "server.log"
        with _serve("MariaDB", command, _mariadb_ready, account, log, signal.SIGTERM) as port:
            yield MariadbServer(HOST, port, socket=sock, data_dir=data)


# --- Running the servers -------------------------------------------------------------------


@dataclass(frozen=True)
class _Account:
    """Who the server runs as: None to stay this process's user."""

    uid: int | None = None
    gid: int | None = None


@contextlib.contextmanager
def _server_dir(prefix: str, users: tuple[str, ...]) -> Iterator[tuple[Path, _Account]]:
    account = _account(users)
    base = None if account.uid is None or _traversable(Path(tempfile.gettempdir())) else "/tmp"
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    try:
        if account.uid is not None:
            os.chown(root, account.uid, account.gid or 0)
        yield root, account
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _account(users: tuple[str, ...]) -> _Account:
    if os.geteuid() != 0:
        return _Account()
    for name in (*users, "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return _Account(entry.pw_uid, entry.pw_gid)
    raise StartFailed(f"running as root and none of the users {users} or nobody exists")


def _traversable(path: Path) -> bool:
    """Whether every folder down to path lets other users through (for a dropped user)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))


def _prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: servers outlive a killed run
        return None


_PRCTL = _prctl()  # looked up here, not in the forked child


def _child_setup() -> None:
    """In the server's process, after it became the account: die with the test process."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGKILL))


def _spawn(command: list[str], account: _Account, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            user=account.uid,
            group=account.gid,
            extra_groups=[] if account.uid is not None else None,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"},
            cwd="/",
            preexec_fn=_child_setup,
        )


def _run(command: list[str], account: _Account, log: Path) -> None:
    process = _spawn(command, account, log)
    try:
        code = process.wait(timeout=INIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise StartFailed(
            f"{Path(command[0]).name} did not finish in {INIT_TIMEOUT:g} s{_tail(log)}"
        ) from None
    if code != 0:
        raise StartFailed(f"{Path(command[0]).name} failed (exit {code}){_tail(log)}")


@contextlib.contextmanager
def _serve(
    what: str,
    command: Callable[[int], list[str]],
    ready: Callable[[int], bool],
    account: _Account,
    log: Path,
    stop: signal.Signals,
) -> Iterator[int]:
    """Start the server on a free port; yield the port once it accepts connections."""
    for attempt in range(1, PORT_TRIES + 1):
        port = _free_port()
        log.write_text("")
        process = _spawn(command(port), account, log)
        try:
            if not _wait_ready(what, process, ready, port, log):
                if attempt < PORT_TRIES:
                    continue  # another process took the port first: try another one
                raise StartFailed(f"{what} could not bind a free port{_tail(log)}")
            yield port
            return
        finally:
            _stop(process, stop)


def _wait_ready(
    what: str,
    process: subprocess.Popen[bytes],
    ready: Callable[[int], bool],
    port: int,
    log: Path,
) -> bool:
    """True once the server accepts connections on port; False if it died because the
    port was taken; StartFailed when it died otherwise or passed START_TIMEOUT."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        code = process.poll()
        if code is not None:
            text = log.read_text(errors="replace")
            if "already in use" in text:
                return False
            raise StartFailed(f"{what} exited (code {code}) at start-up{_tail(log)}")
        if ready(port):
            return True
        if time.monotonic() > deadline:
            raise StartFailed(
                f"{what} did not accept connections on {HOST}:{port} within "
                f"{START_TIMEOUT:g} s (process {process.pid} still running){_tail(log)}"
            )
        time.sleep(0.05)


def _postgres_ready(port: int) -> bool:
    """Whether PostgreSQL takes a session (it listens before it has finished starting)."""
    import psycopg

    try:
        with psycopg.connect(PostgresServer(HOST, port).admin_url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return False
    return True


def _mariadb_ready(port: int) -> bool:
    """Whether MariaDB greets on port (it listens once it is ready): a handshake packet,
    protocol 10, not an error packet."""
    try:
        with socket.create_connection((HOST, port), timeout=2.0) as conn:
            head = conn.recv(5)
    except OSError:
        return False
    return len(head) == 5 and head[4] == 10


def _stop(process: subprocess.Popen[bytes], how: signal.Signals) -> None:
    if process.poll() is not None:
        return
    process.send_signal(how)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return f"; the last lines of {log.name}:\n" + "\n".join(text) if text else f"; {log} is empty"


def run_beside_mariadb(command: list[str]) -> int:
    """Run ``command`` with a MariaDB of its own, told by CPSCHED_TEST_MARIADB
    (``host:port``), which the ``mariadb_server`` fixture then uses: the tests in the
    Debian 13 root store in the machine's MariaDB 10.11 (Debian 13's slurmdbd 24.11.5 dies
    at start against Debian 13's MariaDB 11.8: docs/bridge.md)."""
    with mariadb() as server:
        env = {**os.environ, "CPSCHED_TEST_MARIADB": f"{server.host}:{server.port}"}
        return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    # python -m tests.dbservers mariadb -- COMMAND...: COMMAND beside a MariaDB of its own
    if sys.argv[1:3] == ["mariadb", "--"] and len(sys.argv) > 3:
        sys.exit(run_beside_mariadb(sys.argv[3:]))
    sys.exit("usage: python -m tests.dbservers mariadb -- COMMAND [ARGS...]")
