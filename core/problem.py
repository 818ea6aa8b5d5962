"""Problem types of the dispatch core: what a dispatcher sees and what it answers.

Resources are data: a snapshot names its resource types once (``resource_names``) and
every capacity or request is a tuple of integers aligned with those names. Nodes are
referred to by their index in ``Snapshot.nodes``; names exist for the wire and for people.

Everything here is immutable and free of I/O and clocks: time is ``Snapshot.time``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter
from typing import Literal

from cpsched.core.site import NO_CONSTRAINTS, NO_SITE, Constraints, Site
from cpsched.errors import SnapshotError

Amounts = tuple[int, ...]
"""Amounts of each resource type, aligned with ``Snapshot.resource_names``."""

Wanted = tuple[tuple[int, int], ...]
"""The types a unit asks for, as ``(type index, amount)`` pairs with amount > 0."""

Allocation = tuple[tuple[int, int], ...]
"""Where a job's units sit: ``(node index, units on that node)`` pairs, nodes distinct."""

Layout = Literal["any", "block"]
"""How a job's units may be spread over the nodes it is given.

``any``: any number of units on each chosen node. ``block``: the way Slurm lays out the
tasks of a job pinned to a node list: one unit on every chosen node, then the rest
filling the chosen nodes in node order, each up to what fits. A block allocation is the
only one a workload manager that spreads tasks itself reproduces exactly
(:func:`cpsched.core.layout.block_layout`).
"""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    capacity: Amounts
    features: frozenset[str] = frozenset()
    """What ``Constraints.features`` expressions test (Slurm's node features)."""


@lru_cache(maxsize=1 << 16)
def _derived(units: int, unit_request: Amounts) -> tuple[Amounts, Wanted, bool]:
    """A job's total request and requested types: read in every hot loop of the
    dispatchers, so computed once, and shared between the many jobs of equal shape; and
    whether it asks for a negative amount (checked once per shape, too)."""
    request = tuple(units * a for a in unit_request)
    wanted = tuple((r, a) for r, a in enumerate(unit_request) if a)
    return request, wanted, any(a < 0 for a in unit_request)


@dataclass(frozen=True, slots=True)
class Job:
    """A job as submitted: ``units`` identical units, each needing ``unit_request``.

    ``resource_names`` names the entries of ``unit_request`` (the snapshot's or the
    system's types, in their order), so that what is not positional (a predictor's
    features) can read a type by name; empty when nobody said (then no type is named).
    """

    id: str
    submit: int
    time_limit: int
    units: int
    unit_request: Amounts
    user: str = ""
    group: str = ""
    name: str = ""
    queue: str = ""
    layout: Layout = "any"
    constraints: Constraints | None = None
    """The site's rules for this job (:mod:`cpsched.core.site`); None: none apply."""
    priority: int | None = None
    """The site's own priority (higher goes first), when the workload manager gives one."""
    rerunnable: bool = True
    """The workload manager may put it back in the queue once started, and it never went
    back yet: it may be given a trial run (:mod:`cpsched.core.trial_runs`). Every job of a
    replay may; a bridge says it per job (Slurm's ``--requeue`` and restart count)."""
    resource_names: tuple[str, ...] = field(default=(), repr=False, compare=False)
    request: Amounts = field(init=False, repr=False, compare=False)
    wanted: Wanted = field(init=False, repr=False, compare=False)
    exclusive: bool = field(init=False, repr=False, compare=False)
    """Whether it takes its nodes whole (read where capacity is taken and given back)."""

    def __post_init__(self) -> None:
        if self.units < 1:
            raise SnapshotError(f"job {self.id}: units must be >= 1, got {self.units}")
        if self.time_limit < 1:
            raise SnapshotError(f"job {self.id}: time limit must be >= 1 s, got {self.time_limit}")
        request, wanted, negative = _derived(self.units, self.unit_request)
        if negative:
            raise SnapshotError(f"job {self.id}: negative resource request {self.unit_request}")
        if not wanted:
            raise SnapshotError(f"job {self.id}: requests no resource at all")
        object.__setattr__(self, "request", request)
        object.__setattr__(self, "wanted", wanted)
        constraints = self.constraints
        if constraints is not None and constraints == NO_CONSTRAINTS:
            constraints = None  # rules that say nothing are no rules: one way to say it
            object.__setattr__(self, "constraints", None)
        object.__setattr__(self, "exclusive", constraints is not None and constraints.exclusive)

    def amount(self, resource: str) -> int:
        """The job's whole request of the type named ``resource`` (0: none, or unnamed)."""
        names = self.resource_names
        return self.request[names.index(resource)] if resource in names else 0


@dataclass(frozen=True, slots=True)
class RunningJob:
    job: Job
    start: int
    time_limit: int
    """The current limit (the submitted one, or as extended or tightened since)."""
    allocation: Allocation
    extensions: int = 0
    """How many times the limit has been extended (walltime correction counts them)."""
    trial: bool = False
    """A trial run (:mod:`cpsched.core.trial_runs`): ``time_limit`` is the trial's end, when
    the job goes back to the queue unless it has ended (no limit of it is extended)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster at ``time``: nodes, running jobs and the queue in submission order
    (by ``submit``, ties in arrival order: FCFS relies on it instead of sorting per call).

    ``free`` (per node) and ``free_total`` (per type) are the capacity not used by the
    running jobs. Build snapshots with :func:`make_snapshot`, which derives them from
    the allocations; a caller that tracks them incrementally (the replay) may pass them,
    and :func:`cpsched.core.validate.check_snapshot` verifies they agree.
    """

    time: int
    resource_names: tuple[str, ...]
    nodes: tuple[Node, ...]
    running: tuple[RunningJob, ...]
    queued: tuple[Job, ...]
    free: tuple[Amounts, ...]
    free_total: Amounts
    capacity_total: Amounts
    site: Site = NO_SITE
    """Partitions and reservations (:mod:`cpsched.core.site`); empty: one pool of nodes."""


def used_by(running: Sequence[RunningJob], nodes: int) -> dict[int, list[int]]:
    """What ``running`` uses on each node it runs on (of ``nodes``)."""
    used: dict[int, list[int]] = {}
    for rj in running:
        ureq = rj.job.unit_request
        for node, units in rj.allocation:
            if not 0 <= node < nodes:
                raise SnapshotError(f"running job {rj.job.id} is allocated to unknown node {node}")
            row = used.get(node)
            if row is None:
                row = used[node] = [0] * len(ureq)
            for r, amount in enumerate(ureq):
                row[r] += units * amount
    return used


@dataclass(frozen=True, slots=True)
class NodeUse:
    """What the running jobs use on each node they run on (as :func:`used_by` sums it),
    kept up to date as jobs start and end: on a large busy machine a call then sums only
    the jobs that changed, not the tens of thousands still running."""

    used: dict[int, list[int]]
    jobs: dict[int, int]
    """How many running jobs are allocated to each node in ``used``."""
    exclusive: dict[int, int]
    """How many of them take their nodes whole, on each node one does."""
    touched: frozenset[int] | None = None
    """The nodes whose use :meth:`changed` changed; None: made from scratch."""

    @classmethod
    def of(cls, running: Sequence[RunningJob], nodes: int) -> NodeUse:
        jobs: dict[int, int] = {}
        exclusive: dict[int, int] = {}
        for rj in running:
            whole = rj.job.exclusive
            for node, _ in rj.allocation:
                jobs[node] = jobs.get(node, 0) + 1
                if whole:
                    exclusive[node] = exclusive.get(node, 0) + 1
        return cls(used_by(running, nodes), jobs, exclusive)

    def changed(
        self, gone: Iterable[RunningJob], added: Iterable[RunningJob], nodes: int
    ) -> NodeUse:
        """This use without the ``gone`` jobs and with the ``added`` ones (a new object:
        the rows it changes are copies, this one stays as it was)."""
        used, jobs, exclusive = dict(self.used), dict(self.jobs), dict(self.exclusive)
        copied: set[int] = set()

        def own_row(node: int) -> list[int]:
            row = used[node]
            if node not in copied:
                row = used[node] = list(row)
                copied.add(node)
            return row

        for rj in gone:
            ureq = rj.job.unit_request
            for node, units in rj.allocation:
                row = own_row(node)
                for r, amount in enumerate(ureq):
                    row[r] -= units * amount
                jobs[node] -= 1
                if not jobs[node]:
                    del used[node], jobs[node]
                if rj.job.exclusive:
                    exclusive[node] -= 1
                    if not exclusive[node]:
                        del exclusive[node]
        for rj in added:
            ureq = rj.job.unit_request
            for node, units in rj.allocation:
                if not 0 <= node < nodes:
                    raise SnapshotError(
                        f"running job {rj.job.id} is allocated to unknown node {node}"
                    )
                if node in used:
                    row = own_row(node)
                else:
                    row = used[node] = [0] * len(ureq)
                    copied.add(node)
                for r, amount in enumerate(ureq):
                    row[r] += units * amount
                jobs[node] = jobs.get(node, 0) + 1
                if rj.job.exclusive:
                    exclusive[node] = exclusive.get(node, 0) + 1
        return NodeUse(used, jobs, exclusive, frozenset(copied))


def make_snapshot(
    time: int,
    resource_names: Sequence[str],
    nodes: Sequence[Node],
    running: Sequence[RunningJob] = (),
    queued: Sequence[Job] = (),
    site: Site = NO_SITE,
    used: Mapping[int, Sequence[int]] | None = None,
    since: tuple[Snapshot, AbstractSet[int]] | None = None,
    whole: AbstractSet[int] | None = None,
) -> Snapshot:
    """A snapshot whose free capacity is derived from the running jobs' allocations.

    A node running an exclusive job has nothing free (nor less than nothing, unless other
    jobs over-fill it: that stays visible to :func:`~cpsched.core.validate.check_snapshot`).
    ``used``: what the running jobs use on each node they run on, and ``whole``: the
    nodes an exclusive job runs on, when the caller has them already (the service's
    codec: :class:`NodeUse`). ``since``: an earlier snapshot of the same nodes and every
    node whose free row may differ from then (what runs there changed, or it is another
    :class:`Node`): the caller vouches that every other node is the very same object as
    then, which keeps its free row, so that a call on a large busy machine derives rows
    (and totals) only where jobs started or ended.
    """
    if used is None:
        used = used_by(running, len(nodes))
    if whole is None:
        whole = {node for rj in running if rj.job.exclusive for node, _ in rj.allocation}
    zeros = tuple(0 for _ in resource_names)
    redo: AbstractSet[int]
    if since is not None and len(since[0].nodes) != len(nodes):
        since = None  # another machine: every row from scratch
    if since is not None:
        before, redo = since
        free = list(before.free)
        for i in redo:
            free[i] = nodes[i].capacity
    else:
        # A node nothing runs on shares its capacity tuple as its free row: on a large,
        # mostly idle machine a call then makes rows only where jobs run.
        free = [n.capacity for n in nodes]
        redo = used.keys()
    for node in redo:
        amounts = used.get(node)
        if amounts is None:
            continue  # nothing runs there (any more): its capacity is free
        left = [c - u for c, u in zip(free[node], amounts, strict=True)]
        free[node] = tuple(min(x, 0) for x in left) if node in whole else tuple(left)
    if since is not None:
        # The totals moved only by the rows and capacities that changed (exact integers).
        free_total = _moved(
            before.free_total, (free[i] for i in redo), (before.free[i] for i in redo)
        )
        capacity_total = _moved(
            before.capacity_total,
            (nodes[i].capacity for i in redo),
            (before.nodes[i].capacity for i in redo),
        )
    else:
        free_total = tuple(sum(col) for col in zip(*free, strict=True)) if free else zeros
        capacity_total = (
            tuple(sum(col) for col in zip(*(n.capacity for n in nodes), strict=True))
            if nodes
            else zeros
        )
    return Snapshot(
        time=time,
        resource_names=tuple(resource_names),
        nodes=tuple(nodes),
        running=tuple(running),
        queued=tuple(sorted(queued, key=attrgetter("submit"))),
        free=tuple(free),
        free_total=free_total,
        capacity_total=capacity_total,
        site=site,
    )


def _moved(total: Amounts, now: Iterable[Amounts], then: Iterable[Amounts]) -> Amounts:
    """``total`` with the rows ``then`` replaced by the rows ``now``."""
    moved = list(total)
    for row in now:
        for r, x in enumerate(row):
            moved[r] += x
    for row in then:
        for r, x in enumerate(row):
            moved[r] -= x
    return tuple(moved)


@dataclass(frozen=True, slots=True)
class Start:
    job_id: str
    allocation: Allocation
    may_drift: bool = False
    """A block start the dispatcher knows the workload manager's split of could still
    change (a job on its nodes ending first): it waited the policy's ``split_wait`` for a
    steady one (:mod:`cpsched.core.steady_blocks`). The bridge then starts it at once."""
    trial: int | None = None
    """A trial run (:mod:`cpsched.core.trial_runs`): the job runs at most this many seconds
    and goes back to the queue then, unless it has ended (None: an ordinary start)."""


@dataclass(frozen=True, slots=True)
class Extension:
    """Raise a running job's time limit to ``new_limit`` seconds (never lower it)."""

    job_id: str
    new_limit: int
    reason: str


@dataclass(frozen=True, slots=True)
class Diagnostics:
    dispatcher: str
    solver_status: str = "heuristic"
    fallback: bool = False
    fallback_reason: str | None = None
    """Why the fallback heuristic answered, when ``fallback``: the CP dispatchers' "no time
    left for <phase>", "model too large", "no CP solution (<status>)" or "invalid CP
    decision"; the service's "deadline", "invalid" or "error"."""
    restarts: int = 0
    model_variables: int = 0
    model_constraints: int = 0
    model_intervals: int = 0
    split_waiting: int = 0
    """Queued block jobs not started that have waited for a steady split
    (:mod:`cpsched.core.steady_blocks`), held by the placer or the final check."""
    split_dropped: int = 0
    """Of which starts the dispatcher had decided and the final check took out."""
    guaranteed: int = 0
    """Queued jobs holding a start guarantee after this call (:mod:`cpsched.core.wait_bound`)."""
    guarantees_broken: int = 0
    """Of which the guarantees this call could not keep (a limit extended, a restart)."""
    partial: bool = False
    """A heuristic stopped at its caller's deadline (``DispatcherState.stop``): the starts
    are valid, but jobs after the last one it looked at were not considered."""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    starts: tuple[Start, ...]
    extensions: tuple[Extension, ...] = ()
    planned: Mapping[str, int] | None = None
    """Planned start time of queued jobs, when the dispatcher computes a plan."""
    diagnostics: Diagnostics = field(default_factory=lambda: Diagnostics("unknown"))
