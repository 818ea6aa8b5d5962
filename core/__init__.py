"""The dispatch core: a pure function of (snapshot, durations, configuration) → decision.

No I/O and no clock reads happen below this package: time is ``Snapshot.time``. The
service, the replay driver and the tests all call it through :func:`make_dispatcher`.
"""

from cpsched.core.allocators import ALLOCATORS, make_allocator
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations, remaining
from cpsched.core.problem import (
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
from cpsched.core.registry import DISPATCHERS, make_dispatcher
from cpsched.core.validate import check_decision, check_snapshot, decision_violations

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
