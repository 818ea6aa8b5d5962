"""What every resource's routes document: the error answers."""

from __future__ import annotations

from typing import Any

from cpsched.wire.schemas import ErrorOut

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut},
    503: {"model": ErrorOut},
    401: {"model": ErrorOut},
    403: {"model": ErrorOut},
    413: {"model": ErrorOut},
    422: {"model": ErrorOut},
}
"""Error answers every cluster route may give, for the OpenAPI document."""
