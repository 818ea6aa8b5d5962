"""Placing a block job where the workload manager's own split cannot drift.

A block job (:mod:`cpsched.core.layout`) pinned to several nodes is split by Slurm when
it allocates it, a second or so after the snapshot: one task on every node, then the
nodes filled in node order, each with as many tasks as fit *then*. A job that ends in
between on one of those nodes leaves more room there, so Slurm puts more tasks on it and
fewer on the later ones: the job runs on another split than decided. (On the live test
bed most remaining mismatches were that.)

A block start is *steady* when its split comes out the same with every running job on
its nodes ended: the split only grows with a node's room, so no partial ending changes
it either. A node where the job's fit cannot grow (idle, or the job's tasks-per-node
rule reached already) is *settled*; a start whose nodes but the last in order are
settled is steady, since the last node gets what is left whatever its room.

:class:`SteadyBlocks` wraps an allocator. A block job's placement that is steady is
given as Slurm's split of its nodes, not the allocator's own, so that the decision's
later starts leave it the room it was found steady with. One that is not steady is
replaced by a steady one on the same free capacity when there is one (the fewest nodes:
settled ones, plus one last node that may be in use). When there is none and the
placement would start the job *now* (not in capacity free only later,
``FreeCapacity.later``), the job waits instead, if a job running on one of its nodes
where that end changes its split is expected to end within ``wait`` seconds (by the
durations: a steady split may come then). The allocator then says it does not fit now,
so EASY reserves it and HCP3 postpones it. It waits at most ``wait`` seconds of
snapshot time from the first call it waited on. Then, or at once when no such end is
expected that soon (waiting would leave the room idle and the split no safer: it
drifts only if a job there ends in the second before Slurm allocates, as likely later
as now), it starts on the unsteady placement, marked ``may_drift`` so that the bridge
does not make it wait. Placements in later capacity (reservations) are kept as they
are: nothing starts on them yet. Other jobs go straight through, so replays of traces
(no block jobs) place exactly as before.

A decision's later starts may take room on a block job's nodes, and the re-split
(:func:`~cpsched.core.layout.lay_out`) then gives it another split than the one found
steady. :class:`SteadyStarts` checks each laid-out block start once more, against the
room the whole decision leaves: one that could drift is taken out of the decision (it
waits, as above) or, once it need not wait, marked ``may_drift``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from operator import attrgetter

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity, units_fitting
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations, remaining
from cpsched.core.layout import MAX_PASSES, block_layout, lay_out, most_per_node, started_jobs
from cpsched.core.problem import Allocation, Amounts, Decision, Job, Snapshot

SPLIT_WAIT_S = 30
"""Seconds a block job that could start now on an unsteady split waits for a steady one
(the policy's ``split_wait``); as long as the bridge's own ``split_drift_wait_s``."""


class SteadyBlocks:
    """``inner``, with block jobs placed steadily where they can be (module doc).

    ``waiting`` maps each block job that has waited for a steady placement to the
    snapshot time it first waited, until it leaves the queue (its wait is bounded from
    then: a steady placement that is then not started, or that a site's node-count rule
    refuses, does not restart it); the caller may keep it between calls
    (``DispatcherState``).
    """

    def __init__(
        self, inner: Allocator, *, wait: int = SPLIT_WAIT_S, waiting: dict[str, int] | None = None
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.wait = wait
        self.waiting = waiting if waiting is not None else {}
        self._snapshot: Snapshot | None = None
        self._durations: Durations = {}
        self._ends: ExpectedEnds | None = None

    def observe(self, snapshot: Snapshot, durations: Durations) -> None:
        observe = getattr(self.inner, "observe", None)
        if observe is not None:
            observe(snapshot, durations)
        self._snapshot = snapshot
        self._ends = None  # worked out when a task job could drift
        self._durations = durations
        if self.waiting:  # forget the jobs that started or left meanwhile
            queued = {job.id for job in snapshot.queued}
            for job_id in [j for j in self.waiting if j not in queued]:
                del self.waiting[job_id]

    def place(self, job: Job, free: FreeCapacity) -> Allocation | None:
        allocation = self.inner.place(job, free)
        if job.layout != "block" or allocation is None or len(allocation) < 2:
            return allocation  # inline: every placement of a replay passes here
        return self._steadily(job, allocation, free, search=True)

    def vet(self, job: Job, allocation: Allocation, free: FreeCapacity) -> Allocation | None:
        """``allocation``, found for ``job`` in ``free`` by other means (a site's
        node-count rule), if it is steady; else held back as :meth:`place` holds back
        its own unsteady placements."""
        return self._steadily(job, allocation, free, search=False)

    def _steadily(
        self, job: Job, allocation: Allocation, free: FreeCapacity, *, search: bool
    ) -> Allocation | None:
        """``allocation`` as Slurm splits it if that is steady; else (``search``) a
        steady placement elsewhere in ``free``; else ``allocation`` if it need not wait
        (a reservation, or waiting is not worth it: :meth:`worth_waiting`); else None."""
        if job.layout != "block" or len(allocation) < 2:
            return allocation
        split = self.steady_layout(job, allocation, free)
        if split is None and search:
            settled = frozenset(n for n in range(free.node_count) if self.settled(job, n, free))
            split = steady_placement(job, free, settled)
        if split is not None:
            return split
        if free.later or not self.worth_waiting(job, allocation, free):
            return allocation
        return None  # not now: a steady moment comes when a job on these nodes ends

    def steady(self, job: Job, allocation: Allocation, free: FreeCapacity) -> bool:
        """Whether Slurm's split of ``job`` on ``allocation``'s nodes comes out the same
        with every running job there ended."""
        return self.steady_layout(job, allocation, free) is not None

    def steady_layout(
        self, job: Job, allocation: Allocation, free: FreeCapacity
    ) -> Allocation | None:
        """Slurm's split of ``job`` on ``allocation``'s nodes in ``free`` if it is steady
        (the same with every running job there ended), else None. That split, not
        ``allocation``'s own, is what the job gets: the decision's later starts then
        leave it the room it was found steady with."""
        return steady_layout_in(self._snapshot, job, allocation, free)

    def settled(self, job: Job, node: int, free: FreeCapacity) -> bool:
        """Whether ``job``'s fit on ``node`` cannot grow when the jobs running there end."""
        most = most_per_node(job)
        fit = min(units_fitting(free.row(node), job.wanted), most)
        grown = grown_rows(self._snapshot, [node], free)[0]
        return fit == min(units_fitting(grown, job.wanted), most)

    def worth_waiting(self, job: Job, allocation: Allocation, free: FreeCapacity) -> bool:
        """Whether ``job``, unsteady on ``allocation`` in ``free``, should wait for a
        steady split (starting its wait now if it had not): :func:`worth_waiting`."""
        if self._snapshot is None:
            return False  # no running job: nothing to wait for
        if self._ends is None:
            self._ends = ExpectedEnds(self._snapshot, self._durations)
        drifting = drifting_nodes_in(self._snapshot, job, allocation, free)
        return worth_waiting(self._ends, job, drifting, self.waiting, self.wait)


def worth_waiting(
    ends: ExpectedEnds, job: Job, drifting: Sequence[int], waits: dict[str, int], wait: int
) -> bool:
    """Whether ``job`` should wait for a steady split: while it has waited less than
    ``wait`` seconds (since ``waits`` records it first waited; recorded now if not) and
    a job running on one of the ``drifting`` nodes (where an end changes its split) is
    expected to end before what is left of them has passed (module doc)."""
    now = ends.now
    left = wait - (now - waits.get(job.id, now))
    if left <= 0 or not ends.before(drifting, left):
        return False
    waits.setdefault(job.id, now)
    return True


class ExpectedEnds:
    """When the first of the jobs running on each node is expected to end (by the
    durations), worked out on first use: only decisions with a task job that could drift
    need it. A job planned to run to its limit (no prediction, or one it has outlived)
    has no expected end: the limit only bounds it, so it may end any moment."""

    def __init__(self, snapshot: Snapshot, durations: Durations) -> None:
        self.snapshot = snapshot
        self.durations = durations
        self.now = snapshot.time
        self._first: list[int | None] | None = None

    def before(self, nodes: Sequence[int], seconds: int) -> bool:
        """Whether a job running on one of ``nodes`` is expected to end in less than
        ``seconds`` (an end due just as a wait runs out comes too late for it)."""
        if self._first is None:
            self._first = self._first_ends()
        return any((end := self._first[n]) is not None and end < seconds for n in nodes)

    def _first_ends(self) -> list[int | None]:
        first: list[int | None] = [None] * len(self.snapshot.nodes)
        for running in self.snapshot.running:
            expected = self.durations.get(running.job.id, running.time_limit)
            # Planned to its limit (no prediction, or past it): it may end any moment.
            left = 0 if expected >= running.time_limit else remaining(running, expected, self.now)
            for node, _ in running.allocation:
                known = first[node]
                first[node] = left if known is None else min(known, left)
        return first


def grown_rows(
    snapshot: Snapshot | None, nodes: Sequence[int], free: FreeCapacity
) -> list[Amounts]:
    """The rows of ``free`` for ``nodes`` with what the snapshot's running jobs hold there
    added: each node's room once they have ended."""
    if snapshot is None:
        return [free.row(n) for n in nodes]
    return [
        tuple(a + h for a, h in zip(free.row(n), held_by_running(snapshot, n), strict=True))
        for n in nodes
    ]


def held_by_running(snapshot: Snapshot, node: int) -> Amounts:
    """What the snapshot's running jobs hold on ``node``: its room grows by this when
    they all end."""
    capacity, unused = snapshot.nodes[node].capacity, snapshot.free[node]
    return tuple(c - u for c, u in zip(capacity, unused, strict=True))


def steady_layout(
    job: Job, nodes: Sequence[int], room: Sequence[Amounts], grown: Sequence[Amounts]
) -> Allocation | None:
    """Slurm's split of ``job`` over ``nodes`` with each node's ``room`` if it is steady
    (the same with each node's ``grown`` room, its room once the jobs running there
    ended), else None (also when the job does not fit them: its tasks-per-node limit)."""
    now, then = _fits(job, room), _fits(job, grown)
    if sum(now) < job.units:
        return None
    split = block_layout(job.units, list(zip(nodes, now, strict=True)))
    return split if split == block_layout(job.units, list(zip(nodes, then, strict=True))) else None


def drifting_nodes(
    job: Job, nodes: Sequence[int], room: Sequence[Amounts], grown: Sequence[Amounts]
) -> list[int]:
    """The ``nodes`` where the end of the jobs running there (``grown``: each node's
    room then) changes Slurm's split of ``job``; none when it does not fit them."""
    now, then = _fits(job, room), _fits(job, grown)
    if sum(now) < job.units:
        return []
    split = block_layout(job.units, list(zip(nodes, now, strict=True)))
    drifting = []
    for i, node in enumerate(nodes):
        if then[i] > now[i]:
            fits = [*now[:i], then[i], *now[i + 1 :]]
            if block_layout(job.units, list(zip(nodes, fits, strict=True))) != split:
                drifting.append(node)
    return drifting


def _fits(job: Job, rows: Sequence[Amounts]) -> list[int]:
    most = most_per_node(job)
    return [min(units_fitting(row, job.wanted), most) for row in rows]


def steady_layout_in(
    snapshot: Snapshot | None, job: Job, allocation: Allocation, free: FreeCapacity
) -> Allocation | None:
    """Slurm's split of ``job`` on ``allocation``'s nodes with their room in ``free``, if
    it is steady with the snapshot's running jobs there ended (:func:`steady_layout`)."""
    return steady_layout(job, *_rooms(snapshot, allocation, free))


def drifting_nodes_in(
    snapshot: Snapshot, job: Job, allocation: Allocation, free: FreeCapacity
) -> list[int]:
    """:func:`drifting_nodes` of ``allocation``'s nodes with their room in ``free``."""
    return drifting_nodes(job, *_rooms(snapshot, allocation, free))


def _rooms(
    snapshot: Snapshot | None, allocation: Allocation, free: FreeCapacity
) -> tuple[list[int], list[Amounts], list[Amounts]]:
    """``allocation``'s nodes, their room in ``free``, and their room once the jobs
    running there ended."""
    nodes = [node for node, _ in allocation]
    return nodes, [free.row(n) for n in nodes], grown_rows(snapshot, nodes, free)


class SteadyStarts:
    """``inner``'s decision, laid out, with every block start that could drift taken out
    while waiting for a steady split is worth it, else marked ``may_drift`` (module doc).

    ``waits`` is the placer's record (:class:`SteadyBlocks`' ``waiting``): since when each
    block job has waited for a steady split. The decision's diagnostics say how many
    queued jobs have waited for one and are not started (``split_waiting``) and how many
    starts this check took out (``split_dropped``, named in a note): starts a CP model
    counted on."""

    def __init__(self, inner: Dispatcher, waits: dict[str, int], wait: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.waits = waits
        self.wait = wait

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        decision = self.inner.decide(snapshot, durations)
        decision, dropped = self._checked(snapshot, durations, decision)
        if not self.waits:
            return decision  # no block job waits for a steady split: nothing to report
        started = {start.job_id for start in decision.starts}
        d = decision.diagnostics
        notes = d.notes
        if dropped:
            notes = (*notes, f"held back, their split could drift: {_listed(dropped)}")
        diagnostics = replace(
            d,
            split_waiting=sum(job_id not in started for job_id in self.waits),
            split_dropped=len(dropped),
            notes=notes,
        )
        return replace(decision, diagnostics=diagnostics)

    def _checked(
        self, snapshot: Snapshot, durations: Durations, decision: Decision
    ) -> tuple[Decision, list[str]]:
        """``decision`` laid out and checked; the jobs whose starts were taken out."""
        if not decision.starts or "block" not in map(_layout, snapshot.queued):  # in C
            return decision, []  # trace replays: no block jobs, nothing to lay out
        started = started_jobs(snapshot, decision.starts)
        if not any(job.layout == "block" for job in started.values()):
            return decision, []  # trace replays: no block jobs, nothing to lay out
        decision = lay_out(snapshot, decision, started)
        ends = ExpectedEnds(snapshot, durations)
        dropped: list[str] = []
        for _ in range(MAX_PASSES):
            checked, taken_out = self._check(snapshot, ends, decision, started)
            dropped += taken_out
            if not taken_out:
                return checked, dropped
            decision = lay_out(snapshot, checked, started)  # their room is free again
        checked, taken_out = self._check(snapshot, ends, decision, started)
        return checked, dropped + taken_out

    def _check(
        self,
        snapshot: Snapshot,
        ends: ExpectedEnds,
        decision: Decision,
        started: dict[str, Job],
    ) -> tuple[Decision, list[str]]:
        """The decision with its drifting block starts taken out or marked; the jobs
        taken out."""
        free = FreeCapacity.of(snapshot)
        for start in decision.starts:
            free.take(start.allocation, started[start.job_id])
        kept = []
        dropped: list[str] = []
        marked = False
        for start in decision.starts:
            job = started[start.job_id]
            if job.layout == "block" and len(start.allocation) > 1 and not start.may_drift:
                free.give(start.allocation, job)  # its own share is its room
                steady = steady_layout_in(snapshot, job, start.allocation, free) is not None
                drifting = (
                    [] if steady else drifting_nodes_in(snapshot, job, start.allocation, free)
                )
                free.take(start.allocation, job)
                if not steady:
                    if worth_waiting(ends, job, drifting, self.waits, self.wait):
                        dropped.append(job.id)
                        continue
                    start = replace(start, may_drift=True)
                    marked = True
            kept.append(start)
        if not (dropped or marked):
            return decision, []
        return replace(decision, starts=tuple(kept)), dropped

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)  # transparent, as LayingOutDispatcher


_layout = attrgetter("layout")


def _listed(job_ids: Sequence[str], most: int = 10) -> str:
    shown = ", ".join(job_ids[:most])
    return shown if len(job_ids) <= most else f"{shown} and {len(job_ids) - most} more"


def steady_placement(job: Job, free: FreeCapacity, settled: frozenset[int]) -> Allocation | None:
    """The fewest nodes of ``free`` that hold ``job`` with every node but the last (in
    node order) in ``settled``, split the block way; None if there are none."""
    most = most_per_node(job)
    fits = [min(units_fitting(row, job.wanted), most) for row in free.rows()]
    # Settled nodes, most room first: the ones to fill before a last node.
    roomy = sorted((n for n in settled if fits[n] > 0), key=lambda n: (-fits[n], n))
    best: list[int] | None = None
    for last, fit in enumerate(fits):
        if fit < 1:
            continue
        chosen, held = [last], fit
        for node in roomy:
            if held >= job.units or (best is not None and len(chosen) >= len(best)):
                break
            if node < last:
                chosen.append(node)
                held += fits[node]
        if held >= job.units and len(chosen) <= job.units:
            if best is None or len(chosen) < len(best):
                best = chosen
            if len(best) == 1:
                break
    if best is None:
        return None
    return block_layout(job.units, [(n, fits[n]) for n in best])
