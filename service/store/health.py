"""Whether the database takes the service's work, as its last statements went.

``SELECT 1`` alone answers while the disk is full or a table is locked: ``/readyz`` said
ready on every poll while every write failed. The engine's own events say more: the
time of the last commit, and of the last error a statement met. While the latest error
is newer than the latest commit, the service is not ready, and says why.
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.engine.interfaces import ExceptionContext
from sqlalchemy.exc import InterfaceError, OperationalError


class DatabaseHealth:
    """The engine's last commit and last failure (monotonic seconds), kept by its events."""

    def __init__(self, engine: Engine) -> None:
        self._lock = threading.Lock()
        self.committed = time.monotonic()  # the schema check at start-up wrote or read it
        self.failed: float | None = None
        self.failure = ""
        event.listen(engine, "commit", self._on_commit)
        event.listen(engine, "handle_error", self._on_error)

    def _on_commit(self, _connection: object) -> None:
        with self._lock:
            self.committed = time.monotonic()

    def _on_error(self, context: ExceptionContext) -> None:
        # The database's trouble (unreachable, full, locked, read-only), not a statement's
        # own (those are bugs, reported as such).
        wrapped = context.sqlalchemy_exception
        if not (context.is_disconnect or isinstance(wrapped, OperationalError | InterfaceError)):
            return
        with self._lock:
            self.failed = time.monotonic()
            original = context.original_exception
            self.failure = f"{type(original).__name__}: {str(original).splitlines()[0][:200]}"

    def failing(self) -> str | None:
        """Why the database does not take the service's work now (its latest statement
        failed after the latest commit), or None."""
        with self._lock:
            if self.failed is not None and self.failed > self.committed:
                return self.failure
            return None
