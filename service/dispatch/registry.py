"""Dispatcher names → dispatchers; the one place that knows every policy."""

from __future__ import annotations

from cpsched.errors import UnknownPolicyError
from predictor.correction import CorrectionPolicy
from service.dispatch.allocators import make_allocator
from service.dispatch.correcting import CorrectingDispatcher
from service.dispatch.dispatcher import Dispatcher
from service.dispatch.heuristics import ORDERS, ListDispatcher

# name → (queue order, EASY backfilling?)
HEURISTICS: dict[str, tuple[str, bool]] = {
    "fcfs": ("fcfs", False),
    "sjf": ("sjf", False),
    "ljf": ("ljf", False),
    "easy": ("fcfs", True),
}
DISPATCHERS = tuple(HEURISTICS)


def make_dispatcher(
    name: str,
    allocator: str = "first-fit",
    *,
    plan: bool = True,
    correction: CorrectionPolicy | None = None,
) -> Dispatcher:
    """The dispatcher registered as ``name`` placing jobs with ``allocator``.

    ``plan=False`` lets a dispatcher skip planned starts nobody will read (replays);
    ``correction`` adds walltime-extension directives to its decisions.
    """
    if name not in HEURISTICS:
        raise UnknownPolicyError("dispatcher", name, DISPATCHERS)
    order, backfill = HEURISTICS[name]
    dispatcher: Dispatcher = ListDispatcher(
        name, ORDERS[order], make_allocator(allocator), backfill=backfill, plan=plan
    )
    if correction is not None and correction.kind != "off":
        dispatcher = CorrectingDispatcher(dispatcher, correction)
    return dispatcher
