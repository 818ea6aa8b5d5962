"""Structured logs: one JSON object per line on stderr, quiet (WARNING) by default.

Shared by the service, the CLI and the bridge (it needs only the standard library)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "t": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        # Fields passed with ``extra=`` become keys of their own.
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            # Tracebacks go to the log (never to API clients), on one line.
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure(level: int | str = logging.WARNING, logger: str | None = None) -> None:
    """JSON lines for ``logger`` (default: the root logger, and uvicorn's through it)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    target = logging.getLogger(logger)
    target.handlers[:] = [handler]
    target.setLevel(level)
    if logger is not None:
        target.propagate = False
        return
    # uvicorn's own loggers would otherwise print plain text through their handlers.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        child = logging.getLogger(name)
        child.handlers[:] = []
        child.propagate = True
