"""Wire schema v1: what the bridge, the replay driver and the service exchange.

Only pydantic is imported here: the bridge runs on a controller host and must stay light.
Resources are a mapping name → amount (any name: "cpu", "mem", "gpu", "gres/fpga"...);
memory is in MiB, times are integer seconds since the epoch, durations are seconds.
Job ids are strings (Slurm arrays are "123_4", PBS ids carry the server name).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, model_validator

from cpsched.wire import examples

API_VERSION = "v1"
WRITER_HEADER = "X-Cpsched-Writer"
"""The header a bridge names itself by on each dispatch: the service lets one writer
dispatch per cluster (``cpsched.service.lease``)."""

PRINTABLE = r"^[^\x00-\x08\x0a-\x1f\x7f]*$"
"""Every string the service stores or shows: no control character but the tab. A NUL
cannot go into PostgreSQL text, and the others rewrite a terminal or a log line. (Lone
surrogates, which UTF-8 cannot encode, are refused by the strict string type itself.)"""

_CONTROL = re.compile(PRINTABLE)


def _printable(text: str) -> str:
    # The pattern is stated in the OpenAPI document (for clients and schemathesis); this
    # check says which character was wrong, which a pattern mismatch would not.
    # isprintable (C, no regular expression) holds for almost every string; what it
    # refuses besides control characters (a tab, some non-ASCII) goes to the pattern.
    if not text.isprintable() and _CONTROL.fullmatch(text) is None:
        bad = next(c for c in text if (c < " " and c != "\t") or c == "\x7f")
        raise ValueError(f"contains the control character {bad!r}; send printable text")
    return text


def shown(text: str, limit: int = 1000) -> str:
    """``text`` as an answer or a log line may carry it: control characters and lone
    surrogates escaped (a client's bytes quoted in an error message must not break the
    answer's encoding), at most ``limit`` characters."""
    if not _CONTROL.fullmatch(text) or any("\ud800" <= c <= "\udfff" for c in text):
        text = "".join(
            c if " " <= c != "\x7f" and not "\ud800" <= c <= "\udfff" else repr(c)[1:-1]
            for c in text
        )
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


# Every printable string states its pattern in the schema; the check says which character
# was wrong. Every column that stores one is at least as wide as its maximum length.
_PRINTABLE = (Field(json_schema_extra={"pattern": PRINTABLE}), AfterValidator(_printable))
Name = Annotated[str, Field(min_length=1, max_length=256), *_PRINTABLE]
"""A job, node, partition or reservation name: 1 to 256 printable characters."""
Label = Annotated[str, Field(max_length=1024), *_PRINTABLE]
"""A group, job or partition name, a reason: any printable text up to 1,024 characters."""
UserName = Annotated[str, Field(max_length=256), *_PRINTABLE]
"""A user name: up to 256 printable characters (a Unix account has at most 32)."""
ResourceName = Annotated[str, Field(min_length=1, max_length=64), *_PRINTABLE]

MAX_NODES = 200_000
"""Nodes one snapshot may list (and a replay's system file may declare)."""
MAX_RESOURCE_TYPES = 64
"""Resource types one node or one job may list (the snapshot as a whole: see the codec)."""

# Bounded so that every value fits a 64-bit database column with room for sums.
Time = Annotated[int, Field(ge=0, le=2**40, description="Epoch seconds.")]
Seconds = Annotated[int, Field(ge=1, le=2**40)]
Count = Annotated[int, Field(ge=1, le=2**31 - 1)]
"""Units and node counts: a 32-bit database column."""
Amount = Annotated[int, Field(ge=0, le=2**40)]
Amounts = Annotated[dict[ResourceName, Amount], Field(max_length=MAX_RESOURCE_TYPES)]
NodeState = Literal["up", "drain", "down", "reserved"]


class WireModel(BaseModel):
    # Unknown fields are refused: a typo in a bridge must not silently drop a constraint.
    # Strict: 0 is not False and "5" is not 5 — a bridge bug should be an error, not a guess.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ResponseModel(BaseModel):
    # What the service answers. Clients ignore fields they do not know, so that a newer
    # service (which may add fields) keeps working with an older bridge.
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


Feature = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:+/-]+$")]


class NodeIn(WireModel):
    name: Name
    resources: Amounts = Field(description="Capacity of each resource type on this node.")
    state: NodeState = Field(
        "up", description="Only 'up' nodes receive new jobs; running jobs keep their nodes."
    )
    features: list[Feature] = Field(
        default_factory=list,
        max_length=256,
        description="The node's features (Slurm's node features), which jobs' 'features' test.",
    )
    held_outside: Amounts = Field(
        default_factory=dict,
        # Left out when empty: digests and older services see the snapshot as before.
        exclude_if=lambda held: not held,
        description=(
            "What work the snapshot does not list holds on this node now (jobs of partitions "
            "cpsched does not manage, jobs still completing): not offered to new jobs, but "
            "part of the node's capacity when judging whether a job could ever start."
        ),
    )

    @model_validator(mode="after")
    def _held_within_capacity(self) -> NodeIn:
        for resource, amount in self.held_outside.items():
            if amount > self.resources.get(resource, 0):
                raise ValueError(
                    f"node {self.name}: held_outside has {amount} {resource}, more than its "
                    f"capacity {self.resources.get(resource, 0)}; send at most the capacity"
                )
        return self


class PartitionIn(WireModel):
    """A partition (PBS: queue): the nodes its jobs may use, and its limits."""

    name: Name
    nodes: list[Name] = Field(max_length=MAX_NODES, description="Its nodes, by name.")
    max_time: Seconds | None = Field(None, description="Longest time limit it allows, s.")
    max_nodes: Count | None = Field(None, description="Most nodes one job may use in it.")


class ReservationIn(WireModel):
    """Nodes set aside from ``start`` to ``end`` (a maintenance window, a course, ...):
    only jobs naming it may use them then; no other job may run on them into the window."""

    name: Name
    nodes: list[Name] = Field(min_length=1, max_length=MAX_NODES)
    start: Time
    end: Time

    @model_validator(mode="after")
    def _ends_after_start(self) -> ReservationIn:
        if self.end <= self.start:
            raise ValueError(f"reservation {self.name}: end {self.end} is not after {self.start}")
        return self


class JobIn(WireModel):
    id: Name
    user: UserName = ""
    group: Label = ""
    name: Label = ""
    partition: Label = ""
    qos: Label = Field(
        "",
        # Left out when empty: digests and older services see the snapshot as before.
        exclude_if=lambda qos: not qos,
        description="The job's QOS (Slurm's quality of service), shown to operators; the "
        "workload manager enforces its limits ('eligible' false while one holds the job).",
    )
    submit: Time
    time_limit: Seconds = Field(description="Requested (or current) time limit, seconds.")
    units: Count = Field(description="Identical units (tasks) the job asks for.")
    per_unit: Amounts = Field(description="What one unit needs of each resource type.")
    layout: Literal["any", "block"] = Field(
        "any",
        description=(
            "How the units may be split over nodes. 'block': the workload manager lays "
            "the units out itself (Slurm's tasks of a job pinned to a node list): one on "
            "each chosen node, then filling them in the snapshot's node order; the "
            "service only decides such splits. 'any': any split."
        ),
    )
    # The site's rules (optional; absent, the job may go on any node of the snapshot).
    features: Label | None = Field(
        None,
        description="Required node features, Slurm's --constraint syntax: names with & "
        "(and), | (or), parentheses, one enclosing [a|b] (all nodes the same one).",
    )
    exclusive: bool = Field(False, description="Takes whole nodes, shared with no other job.")
    min_nodes: Count | None = Field(None, description="Fewest nodes the units go on.")
    max_nodes: Count | None = Field(None, description="Most nodes the units go on.")
    tasks_per_node: Count | None = Field(None, description="Most units on any one node.")
    reservation: Name | None = Field(None, description="The reservation it runs in.")
    eligible: bool = Field(
        True,
        description="False while the workload manager holds it back (dependency, begin "
        "time, QOS or association limit, user hold): the service never starts it.",
    )
    reason: Label = Field("", description="Why it is held back (e.g. Slurm's reason code).")
    priority: Annotated[int, Field(ge=-(2**62), le=2**62)] | None = Field(
        None, description="The site's priority (higher first), e.g. Slurm's multifactor one."
    )
    # Left out when at their defaults: digests and older services see the snapshot as before.
    requeue: bool = Field(
        False,
        exclude_if=lambda requeue: not requeue,
        description="The workload manager may put the job back in its queue once started "
        "(Slurm's --requeue, PBS's rerunnable): a policy with trial runs may try it.",
    )
    restarts: Annotated[int, Field(ge=0, le=2**31 - 1)] = Field(
        0,
        exclude_if=lambda restarts: not restarts,
        description="Times it went back to the queue (Slurm's restart count): a job that "
        "went back once is never tried again.",
    )

    @model_validator(mode="after")
    def _asks_for_something(self) -> JobIn:
        if not any(self.per_unit.values()):
            raise ValueError(f"job {self.id}: per_unit requests no resource at all")
        if self.min_nodes and self.max_nodes and self.max_nodes < self.min_nodes:
            raise ValueError(f"job {self.id}: max_nodes is below min_nodes")
        return self


class RunningJobIn(JobIn):
    start: Time
    allocation: dict[Name, Count] = Field(
        description="Units of this job on each node, by node name."
    )
    extensions: Annotated[int, Field(ge=0, le=2**31 - 1)] = Field(
        0, description="Time-limit extensions granted so far."
    )
    trial_end: Time | None = Field(
        None,
        exclude_if=lambda end: end is None,
        description="A trial run (a start with 'trial_s'): when the bridge puts the job "
        "back in the queue, held, unless it has ended by then.",
    )

    @model_validator(mode="after")
    def _allocation_matches_units(self) -> RunningJobIn:
        if self.trial_end is not None and self.trial_end <= self.start:
            raise ValueError(
                f"running job {self.id}: trial_end {self.trial_end} is not after its start "
                f"{self.start}"
            )
        if sum(self.allocation.values()) != self.units:
            raise ValueError(
                f"running job {self.id}: allocation holds {sum(self.allocation.values())} "
                f"units, the job has {self.units}"
            )
        return self


class SnapshotIn(WireModel):
    time: Time = Field(description="The cluster's clock; the service reads no other.")
    nodes: list[NodeIn] = Field(max_length=MAX_NODES)
    running: list[RunningJobIn] = Field(default_factory=list, max_length=1_000_000)
    queued: list[JobIn] = Field(default_factory=list, max_length=1_000_000)
    partitions: list[PartitionIn] = Field(
        default_factory=list,
        max_length=10_000,
        description="When given, a job's 'partition' (one name, or several joined by ',') "
        "restricts it to those partitions' nodes; a job with none may use any node.",
    )
    reservations: list[ReservationIn] = Field(default_factory=list, max_length=10_000)


class DispatchRequest(SnapshotIn):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.DISPATCH]})

    dry_run: bool = Field(
        False, description="Compute a decision but record nothing as applied (shadow mode)."
    )


Digest = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="A SHA-256, hex.")]


class SnapshotDeltaIn(WireModel):
    """What changed since the snapshot of an earlier answer (its ``snapshot_digest``):
    large queues send this instead of the whole snapshot (``/dispatch/delta``)."""

    model_config = ConfigDict(json_schema_extra={"examples": [examples.DELTA]})

    base: Digest = Field(
        description="snapshot_digest of the answer this applies to: the service's latest "
        "for the cluster (else 409: send the whole snapshot)."
    )
    time: Time = Field(description="The cluster's clock; the service reads no other.")
    dry_run: bool = Field(
        False, description="Compute a decision but record nothing as applied (shadow mode)."
    )
    nodes: list[NodeIn] | None = Field(
        None, max_length=MAX_NODES, description="Every node, when any changed; else omitted."
    )
    partitions: list[PartitionIn] | None = Field(
        None, max_length=10_000, description="Every partition, when any changed; else omitted."
    )
    reservations: list[ReservationIn] | None = Field(
        None, max_length=10_000, description="Every reservation, when any changed; else omitted."
    )
    running: list[RunningJobIn] = Field(
        default_factory=list,
        max_length=1_000_000,
        description="Running jobs new since the base (started, or sent as queued there) or "
        "changed.",
    )
    queued: list[JobIn] = Field(
        default_factory=list,
        max_length=1_000_000,
        description="Queued jobs new since the base (submitted, or requeued) or changed.",
    )
    gone: list[Name] = Field(
        default_factory=list,
        max_length=1_000_000,
        description="Ids of the base's jobs no longer queued nor running (ended, cancelled).",
    )
    order: list[Name] | None = Field(
        None,
        max_length=2_000_000,
        description="Every job id, queued ones first, in the whole snapshot's order: sent "
        "only when merging would order them otherwise (jobs keep the order they were "
        "first sent in, new ones last; equal submit times keep the snapshot's order).",
    )


class StartOut(ResponseModel):
    job_id: str
    allocation: dict[str, int] = Field(description="Units on each chosen node, by node name.")
    predicted_run_time: int
    may_drift: bool = Field(
        False,
        description="A 'block' job whose split over its nodes could still change if a job "
        "running there ends before the workload manager allocates it: the service waited "
        "its split_wait for nodes where it cannot, and starts it anyway (start it now).",
    )
    trial_s: Seconds | None = Field(
        None,
        exclude_if=lambda seconds: seconds is None,
        description="A trial run: let the job run at most this many seconds, then put it "
        "back in the queue held for cpsched (it runs again later, from its start), unless "
        "it has ended; report its end as 'trial_end' meanwhile.",
    )


class ExtensionOut(ResponseModel):
    job_id: str
    new_time_limit: int = Field(description="New limit in seconds from the job's start.")
    reason: str


class RejectedJobOut(ResponseModel):
    job_id: str
    reason: str


class DiagnosticsOut(ResponseModel):
    dispatcher: str
    solver_status: str
    fallback: bool
    fallback_reason: str | None = Field(
        default=None,
        description="Why the fallback heuristic answered: the service's 'deadline', 'invalid' "
        "or 'error', or the CP dispatcher's own reason (e.g. 'no time left for solve').",
    )
    restarts: int
    wall_ms: float = Field(
        description="Request arrival to decision ready (the audit row excluded), ms."
    )
    solve_ms: float = Field(description="Of which the dispatcher's decide (or fallback), ms.")
    model_variables: int = 0
    model_constraints: int = 0
    model_intervals: int = 0
    split_waiting: int = Field(
        default=0,
        description="Queued task jobs not started that have waited for a steady split "
        "(one a running job's end cannot change; at most the policy's split_wait).",
    )
    split_dropped: int = Field(
        default=0,
        description="Of which starts the dispatcher had decided and the final check took out.",
    )
    guaranteed: int = Field(
        default=0,
        description="Queued jobs holding a start guarantee (the policy's wait_bound).",
    )
    guarantees_broken: int = Field(
        default=0,
        description="Guarantees this call could not keep (a running job's limit was "
        "extended, or the service restarted): each moved to the earliest time still possible.",
    )
    partial: bool = Field(
        default=False,
        description="The heuristic that answered stopped at the deadline: its starts are "
        "valid, but it did not look at every queued job (the next call goes on).",
    )
    notes: list[str] = Field(default_factory=list)


class DecisionOut(ResponseModel):
    cluster: str
    snapshot_digest: str = Field(
        "",
        description="The snapshot decided on (dry_run aside): the base of a next delta, and "
        "the audit row's digest.",
    )
    decision_id: int | None = Field(description="Audit row of this decision (None if dry run).")
    time: int
    dry_run: bool
    starts: list[StartOut]
    extensions: list[ExtensionOut]
    planned: dict[str, int] | None = Field(
        None, description="Planned start time of queued jobs, when the dispatcher plans."
    )
    rejected: list[RejectedJobOut] = Field(
        default_factory=list,
        description="Queued jobs left out of this decision, e.g. asking for a resource "
        "type no node has; the rest of the queue is dispatched as usual.",
    )
    diagnostics: DiagnosticsOut


JobEndState = Literal["completed", "failed", "cancelled", "timeout", "node_fail", "other"]
JOB_END_STATES: tuple[JobEndState, ...] = get_args(JobEndState)


def end_state(raw: str) -> JobEndState:
    """A workload manager's end state as the schema names it: unknown ones are ``other``."""
    return raw if raw in JOB_END_STATES else "other"


class FinishedJobIn(JobIn):
    start: Time
    end: Time
    state: JobEndState = "completed"

    @model_validator(mode="after")
    def _ends_after_start(self) -> FinishedJobIn:
        if self.end < self.start:
            raise ValueError(f"job {self.id}: end {self.end} is before start {self.start}")
        if self.start < self.submit:
            raise ValueError(
                f"job {self.id}: start {self.start} is before its submission {self.submit}"
            )
        return self


class FinishedBatch(WireModel):
    jobs: list[FinishedJobIn] = Field(min_length=1, max_length=10_000)


class FinishedBatchIn(WireModel):
    """A batch as the service reads it: each job is checked on its own, so that one it
    refuses (listed in :class:`FinishedAck`'s ``refused``) holds back none of the others."""

    model_config = ConfigDict(json_schema_extra={"examples": [examples.FINISHED]})

    jobs: list[dict[str, JsonValue]] = Field(
        min_length=1, max_length=10_000, description="Finished jobs, each a FinishedJobIn."
    )


class RefusedFinishedOut(ResponseModel):
    job_id: str = Field(description="The job's id, or '#<index>' when it had none.")
    reason: str = Field(description="Why it was refused; it will be refused again if re-sent.")


class FinishedAck(ResponseModel):
    stored: int = Field(description="Jobs new to the service, now committed.")
    duplicates: int = Field(description="Jobs the service already had (not counted twice).")
    refused: list[RefusedFinishedOut] = Field(
        default_factory=list, description="Jobs not stored, with why; the rest are stored."
    )


class PendingReason(ResponseModel):
    waits_for: dict[str, int] = Field(
        description="Resources (per type) missing now for the job to start, on the nodes "
        "the site's rules let it use."
    )
    jobs_ahead: list[str] = Field(description="Queued jobs planned before it.")
    planned_start: int | None
    guaranteed_start: int | None = Field(
        None,
        description="The job starts no later than this, as long as the running jobs end by "
        "their limits (the policy's wait_bound guarantee, given once it has waited that "
        "long; it only ever moves earlier). None: no guarantee yet, or no wait bound.",
    )
    today_start: int | None = Field(
        None,
        description="When today's scheduler (EASY on the users' requests), run beside on "
        "the same arrivals (the policy's wait_bound_today), started it: the job has waited "
        "longer than today's would have kept it. None: not yet, or not run.",
    )
    rules: list[str] = Field(
        default_factory=list,
        description="The site's rules that hold it back (a dependency, a limit, a "
        "reservation not begun) or narrow where it may go (partitions, features, "
        "reservations its limit would run into, exclusive, node counts).",
    )


class JobDecisionOut(ResponseModel):
    decision_id: int = Field(
        description="Its audit row (GET .../decisions?after_id=<decision_id - 1>&limit=1)."
    )
    time: int = Field(description="The snapshot's time.")
    action: Literal["start", "extend"] = Field(
        description="'start': the decision started it (a dry run: would have started it); "
        "'extend': it raised the job's time limit."
    )
    dry_run: bool


class ShadowOutcomeOut(ResponseModel):
    """Shadow mode for one job: when cpsched's dry runs would have started it against when
    the workload manager did."""

    would_start: int | None = Field(
        description="The first dry run that would have started it (the snapshot's time); "
        "None: the workload manager started it before any dry run would have."
    )
    started: int | None = Field(description="When the workload manager started it, if it has.")
    verdict: Literal["earlier", "same", "later", "not started"] = Field(
        description="cpsched would have started it earlier, at about the same time (within "
        "the tolerance), later than the workload manager did, or the workload manager has "
        "not started it yet."
    )
    difference_s: int | None = Field(
        description="would_start - started (negative: the wait cpsched would have saved)."
    )
    tolerance_s: int


class JobInfoOut(ResponseModel):
    cluster: str
    job_id: str
    state: Literal["queued", "running", "finished", "rejected", "unknown"]
    user: str | None = None
    submit: int | None = None
    start: int | None = None
    end: int | None = None
    predicted_run_time: int | None = None
    predictor: str | None = None
    prediction_basis: str | None = None
    """What the latest prediction rests on, in the predictor's words."""
    time_limit: int | None = Field(None, description="Its time limit, seconds.")
    request: dict[str, int] | None = Field(
        None, description="What it asks for in all, per resource type (units × per unit)."
    )
    partition: str | None = None
    qos: str | None = None
    priority: int | None = Field(
        None, description="The site's priority the bridge sent (Slurm's), if any."
    )
    pending: PendingReason | None = None
    rejected_because: str | None = Field(
        None, description="Why the latest dispatch left this queued job out."
    )
    decisions: list[JobDecisionOut] = Field(
        default_factory=list,
        description="The decisions that started (or, dry run, would have started) or "
        "extended it, newest first (at most 50 of decisions_total).",
    )
    decisions_total: int = 0
    shadow: ShadowOutcomeOut | None = Field(
        None,
        description="In shadow mode: what the workload manager did instead of what "
        "cpsched's dry runs would have done.",
    )


class AuditEntryOut(ResponseModel):
    id: int
    time: int = Field(description="The snapshot's time.")
    dry_run: bool
    snapshot_digest: str
    queued: int
    running: int
    starts: list[StartOut]
    extensions: list[ExtensionOut]
    diagnostics: dict[str, object]
    recorded_at: str


class AuditPageOut(ResponseModel):
    entries: list[AuditEntryOut]
    next_after_id: int | None = Field(description="Pass as after_id for the next page.")


class ClusterRetiredOut(ResponseModel):
    cluster: str
    deleted: dict[str, int] = Field(
        description="Rows deleted per table: decisions (the audit), predictions, finished_jobs."
    )


class ErrorOut(ResponseModel):
    error: str = Field(description="Machine-readable error kind.")
    detail: str = Field(description="What went wrong and what to do about it.")
