"""Structured logs: one JSON object per line on stderr, quiet (warnings) by default."""

from __future__ import annotations

import json
import logging
import sys

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def setup(verbosity: int) -> None:
    level = (
        logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else (logging.DEBUG)
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("slurm_bridge")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
