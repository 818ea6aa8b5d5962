"""The dispatch core: a pure function of (snapshot, durations, configuration) → decision.

No I/O and no clock reads happen below this package: time is ``Snapshot.time``. The
service, the replay driver and the tests all call it through :func:`make_dispatcher`.
"""

from service.dispatch.allocators import ALLOCATORS, make_allocator
from service.dispatch.dispatcher import Dispatcher
from service.dispatch.durations import Durations, remaining
from service.dispatch.problem import (
    Allocation,
    Decision,
    Diagnostics,
    Extension,
    Job,
    Node,
    RunningJob,
    Snapshot,
    Start,
    make_snapshot,
)
from service.dispatch.registry import DISPATCHERS, make_dispatcher
from service.dispatch.validate import check_decision, check_snapshot, decision_violations

__all__ = [
    "ALLOCATORS",
    "DISPATCHERS",
    "Allocation",
    "Decision",
    "Diagnostics",
    "Dispatcher",
    "Durations",
    "Extension",
    "Job",
    "Node",
    "RunningJob",
    "Snapshot",
    "Start",
    "check_decision",
    "check_snapshot",
    "decision_violations",
    "make_allocator",
    "make_dispatcher",
    "make_snapshot",
    "remaining",
]
