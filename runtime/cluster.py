"""One cluster as both drivers run it: its dispatcher and what that dispatcher learns,
its predictor, the durations it plans with, and its fallback.

The replay's simulator and the service's cluster runtime both hold a :class:`Cluster`
and call :meth:`Cluster.decide`; the durations follow :mod:`cpsched.runtime.durations`.
So a policy replayed on a trace decides as the service would, by construction: what
differs between the two is only where snapshots come from and where decisions go.
"""

from __future__ import annotations

from collections.abc import Iterable

from cpsched.core import Decision, Dispatcher, Job, Snapshot
from cpsched.core.registry import is_cp
from cpsched.core.state import Deadline, DispatcherState
from cpsched.predictor.base import Predictor
from cpsched.runtime.durations import DurationBook
from cpsched.runtime.gc_pause import decide_paused
from cpsched.runtime.overrun import OverrunRule


class Cluster:
    """A cluster's dispatcher, predictor and durations, driven by a simulator or a service."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        predictor: Predictor,
        *,
        fallback: Dispatcher | None = None,
        state: DispatcherState | None = None,
        overrun: OverrunRule = "one-second",
    ) -> None:
        self.dispatcher = dispatcher
        self.predictor = predictor
        self.book = DurationBook(predictor, overrun)
        self.fallback = fallback
        """The heuristic that answers when the dispatcher cannot in time (the service's)."""
        self.dispatcher_state = state
        """What the dispatcher learns between calls, when this cluster made it."""
        self.pause_collector = is_cp(dispatcher.name)
        """Hold the garbage collector off during calls answered against a deadline (the CP
        dispatchers'); the heuristics take microseconds, and a replay calls them hundreds
        of thousands of times, where the pause itself cost 6% of the replay."""

    def decide(self, snapshot: Snapshot, deadline: Deadline | None = None) -> Decision:
        """The dispatcher's decision on ``snapshot`` with the book's durations, those of
        jobs that outlived their predictions corrected first (for a CP dispatcher, with the
        garbage collector held off meanwhile). ``deadline``: when the answer is due (the
        service's: a CP dispatcher searches for the time it leaves, a heuristic returns
        what it has once it has passed); a replay gives none."""
        if self.dispatcher_state is not None:
            self.dispatcher_state.deadline = deadline
        self.book.correct(snapshot.time)
        if self.pause_collector:
            return decide_paused(self.dispatcher, snapshot, self.book.durations)
        return self.dispatcher.decide(snapshot, self.book.durations)

    def started(self, at: int, jobs: Iterable[Job]) -> None:
        """``jobs`` started at ``at`` by a decision applied to the cluster (a dry run's
        starts are not): their waits are what the wait bound counts as overdue by."""
        waits = self.dispatcher_state.recent_waits if self.dispatcher_state else None
        if waits is not None:
            for job in jobs:
                waits.add(at - job.submit)

    def finished(self, job_id: str, start: int, end: int) -> None:
        """``job_id`` ran from ``start`` to ``end`` on the cluster: today's scheduler run
        beside (when the wait bound asks for it) ends it that long after it started it."""
        schedule = self.dispatcher_state.today_schedule if self.dispatcher_state else None
        if schedule is not None:
            schedule.ended(job_id, start, end)

    def decide_by_fallback(self, snapshot: Snapshot, deadline: Deadline) -> Decision:
        """The fallback's decision (the service's, when the dispatcher could not answer
        in time), returning what it has once ``deadline`` has passed."""
        if self.fallback is None:
            raise ValueError("this cluster has no fallback")
        if self.dispatcher_state is not None:
            self.dispatcher_state.deadline = deadline
        return self.fallback.decide(snapshot, self.book.durations)
