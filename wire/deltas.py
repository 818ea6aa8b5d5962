"""Snapshot deltas: what changed since the snapshot the service last answered on.

A bridge of a large site sends its whole queue every cycle; at 100,000 queued jobs
reading and validating that alone takes longer than a short deadline. Between two
cycles about 1% of it changes. A :class:`~cpsched.wire.schemas.SnapshotDeltaIn` carries
only that, against a *base*: the ``snapshot_digest`` of an answer. Both ends keep the
snapshot that digest names (:class:`HeldSnapshot`): the client builds the next delta from
it (:func:`delta_between`), the service applies the delta to it (:func:`apply_delta`).

The service holds one base per cluster, the snapshot of its latest answer. A delta on
any other base (the service restarted, another bridge posted meanwhile) is refused with
:class:`StaleBaseError` (HTTP 409); the client then sends the whole snapshot, which
becomes the new base.

Merged snapshots keep jobs in the order they were first sent, new ones last; when the
whole snapshot orders them otherwise (a requeued job), the delta names the order, since
the core orders the queue by submit time or priority and equal submit times keep the
snapshot's order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass

from cpsched.errors import InputError
from cpsched.wire.schemas import DispatchRequest, JobIn, RunningJobIn, SnapshotDeltaIn

MAX_JOBS = 1_000_000
"""Queued (and running) jobs a merged snapshot may hold: a whole snapshot's bound."""


class StaleBaseError(InputError):
    """A delta's base is not the snapshot the service holds for the cluster."""


class DeltaError(InputError):
    """A delta cannot apply to its base (a job listed twice, gone but never sent...)."""


def snapshot_digest(request: DispatchRequest) -> str:
    """The digest a whole snapshot is answered under (``dry_run`` aside)."""
    return hashlib.sha256(request.model_dump_json(exclude={"dry_run"}).encode()).hexdigest()


def delta_digest(delta: SnapshotDeltaIn) -> str:
    """The digest of the snapshot a delta makes: its base's chained with the delta, so
    that it names exactly what was sent (``dry_run`` aside)."""
    sent = delta.model_dump_json(exclude={"dry_run"}).encode()
    return hashlib.sha256(delta.base.encode() + sent).hexdigest()


@dataclass(frozen=True, slots=True)
class RunningDelta:
    """How a merged snapshot's running jobs differ from its base's, for a reader that
    translated the base (the service's codec) to redo only what changed: at tens of
    thousands of running jobs, a few change per call."""

    base: list[RunningJobIn]
    """The base request's running list (the very object)."""
    sent: list[RunningJobIn]
    """The running jobs the delta sent: new, changed, or the same again."""
    gone: frozenset[str]
    """The base's running jobs not in the merged snapshot as they were: gone, queued
    again, or sent again."""
    ids: Collection[str]
    """The merged snapshot's running jobs, in its order."""


@dataclass(frozen=True, slots=True)
class HeldSnapshot:
    """A snapshot as a delta's base: the request, its jobs by id, and its digest. Never
    changed once made (:func:`apply_delta` copies what it changes), so that two may
    share their job maps."""

    digest: str
    request: DispatchRequest
    queued: dict[str, JobIn]
    running: dict[str, RunningJobIn]
    changes: RunningDelta | None = None
    """How its running jobs differ from those of the snapshot the delta applied to."""

    @classmethod
    def of(cls, request: DispatchRequest, digest: str) -> HeldSnapshot:
        return cls(
            digest,
            request,
            {job.id: job for job in request.queued},
            {job.id: job for job in request.running},
        )


def apply_delta(held: HeldSnapshot | None, delta: SnapshotDeltaIn) -> HeldSnapshot:
    """The snapshot ``delta`` makes of ``held``: its jobs gone removed, its running and
    queued jobs put in (a job moves between the two lists by being sent in the other),
    its nodes, partitions and reservations in place of the held ones when it sends them.

    Raises :class:`StaleBaseError` when ``held`` is not the delta's base and
    :class:`DeltaError` when the delta contradicts itself or its base."""
    if held is None or held.digest != delta.base:
        raise StaleBaseError(
            f"this delta's base {delta.base[:12]}… is not the snapshot the service holds "
            f"for the cluster ({held.digest[:12] + '…' if held else 'none'}: it restarted, or "
            "another client posted since); send the whole snapshot"
        )
    seen: set[str] = set()
    for job_id in (*delta.gone, *(job.id for job in (*delta.running, *delta.queued))):
        if job_id in seen:
            raise DeltaError(f"job {job_id!r} is listed twice in the delta; list each job once")
        seen.add(job_id)
    base = held.request
    if _changes_nothing(delta, base):
        # The same snapshot again (a retry): the same digest, so the same answer.
        again = base.model_copy(update={"dry_run": delta.dry_run})
        unchanged = RunningDelta(base.running, [], frozenset(), held.running)
        return HeldSnapshot(held.digest, again, held.queued, held.running, unchanged)
    queued, running = dict(held.queued), dict(held.running)
    for job_id in delta.gone:
        if queued.pop(job_id, None) is None and running.pop(job_id, None) is None:
            raise DeltaError(
                f"job {job_id!r} is listed as gone but is not in the base snapshot; "
                "send the whole snapshot"
            )
    for job in delta.running:
        queued.pop(job.id, None)
        running[job.id] = job
    for queued_job in delta.queued:
        running.pop(queued_job.id, None)
        queued[queued_job.id] = queued_job
    if len(queued) > MAX_JOBS or len(running) > MAX_JOBS:
        raise DeltaError(f"a snapshot may hold at most {MAX_JOBS:,} queued or running jobs")
    if delta.order is not None:
        queued, running = _in_order(delta.order, queued, running)
    # The parts were validated when they arrived; the whole is checked by the codec.
    request = DispatchRequest.model_construct(
        time=delta.time,
        dry_run=delta.dry_run,
        nodes=base.nodes if delta.nodes is None else delta.nodes,
        partitions=base.partitions if delta.partitions is None else delta.partitions,
        reservations=base.reservations if delta.reservations is None else delta.reservations,
        running=list(running.values()),
        queued=list(queued.values()),
    )
    sent = {job.id for job in delta.running}
    moved = (job_id for job_id in (*delta.gone, *(job.id for job in delta.queued), *sent))
    changes = RunningDelta(
        base.running,
        delta.running,
        frozenset(job_id for job_id in moved if job_id in held.running),
        running,
    )
    return HeldSnapshot(delta_digest(delta), request, queued, running, changes)


def _in_order(
    order: list[str], queued: dict[str, JobIn], running: dict[str, RunningJobIn]
) -> tuple[dict[str, JobIn], dict[str, RunningJobIn]]:
    """``queued`` and ``running`` in ``order``, which must name each of their jobs once.

    The order :func:`delta_between` sends lists the queued jobs, then the running ones;
    when the running ones are in their merged order already (a busy machine: tens of
    thousands, none requeued), only the queued ones are put in order."""
    wrong = DeltaError(
        "the delta's order does not name every job of the merged snapshot once; "
        "send the whole snapshot"
    )
    if len(order) != len(queued) + len(running):
        raise wrong
    head, tail = order[: len(queued)], order[len(queued) :]
    if tail == list(running):
        if set(head) != queued.keys():
            raise wrong
        return {job_id: queued[job_id] for job_id in head}, running
    if set(order) != queued.keys() | running.keys():
        raise wrong  # (with the length: no job named twice, none left out)
    return (
        {job_id: queued[job_id] for job_id in order if job_id in queued},
        {job_id: running[job_id] for job_id in order if job_id in running},
    )


def _changes_nothing(delta: SnapshotDeltaIn, base: DispatchRequest) -> bool:
    return (
        delta.time == base.time
        and not (delta.running or delta.queued or delta.gone)
        and delta.nodes is None
        and delta.partitions is None
        and delta.reservations is None
        and delta.order is None
    )


def delta_between(held: HeldSnapshot, request: DispatchRequest) -> SnapshotDeltaIn | None:
    """The delta that turns ``held`` into ``request``: what a client sends instead of
    ``request`` when the service holds ``held``. It names the jobs' order when the merge
    would order them otherwise (a requeued job goes last), since equal submit times keep
    the snapshot's order. None when ``request`` lists a job twice: only the whole
    snapshot gets the service's error for that."""
    base = held.request
    queued_ids = [job.id for job in request.queued]
    running_ids = [job.id for job in request.running]
    now = {*queued_ids, *running_ids}
    if len(now) < len(queued_ids) + len(running_ids):
        return None
    delta = SnapshotDeltaIn(
        base=held.digest,
        time=request.time,
        dry_run=request.dry_run,
        nodes=None if request.nodes == base.nodes else request.nodes,
        partitions=None if request.partitions == base.partitions else request.partitions,
        reservations=None if request.reservations == base.reservations else request.reservations,
        running=[job for job in request.running if held.running.get(job.id) != job],
        queued=[job for job in request.queued if held.queued.get(job.id) != job],
        gone=[job_id for job_id in (*held.queued, *held.running) if job_id not in now],
    )
    try:
        merged = apply_delta(held, delta)
    except DeltaError:
        return None  # over a bound: the whole snapshot gets the service's error
    if list(merged.queued) == queued_ids and list(merged.running) == running_ids:
        return delta
    return delta.model_copy(update={"order": [*queued_ids, *running_ids]})
