"""What the bridge knows about a cluster after one read: plain frozen data.

Both adapters (Slurm, PBS) produce a ``ClusterState``; the snapshot builder, the
decision applier and the shadow recorder only read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cpsched.slurm_bridge.limits import SiteLimits

NodeStateName = Literal["up", "drain", "down", "reserved"]
Amounts = dict[str, int]


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    capacity: Amounts  # cpu, mem (MiB), each GRES by name
    used: Amounts  # what the workload manager reports allocated now
    state: NodeStateName
    partitions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    cpus_per_core: int = 1  # hardware threads: a core reservation counts cores

    def free(self) -> Amounts:
        return {r: self.capacity[r] - self.used.get(r, 0) for r in self.capacity}


@dataclass(frozen=True, slots=True)
class JobShape:
    """A job's request as identical units: ``units`` × ``per_unit``.

    ``one_unit_per_node``: each unit stands for one whole node of a multi-node job
    (``sbatch -N k`` with per-node GRES or memory); such a job can only start on
    ``units`` distinct nodes, one unit each; it is started with ``cpus_per_node`` (its
    per-node share) as the least CPUs on each node, so that Slurm splits its tasks
    evenly over the nodes instead of filling the first one.
    """

    units: int
    per_unit: Amounts
    one_unit_per_node: bool = False
    single_node: bool = False
    tasks_per_unit: int = 1
    """Tasks a unit of a task job stands for: more than one where Slurm allocates whole
    cores of several threads (``slurm_shape.job_shape``)."""
    asked_cpus: int | None = None
    """CPUs the job asked for, where its units may hold more (whole cores): Slurm's
    job-size priority of a pending job counts these (once it runs, Slurm reports the
    CPUs allocated). None: units × per-unit CPUs."""

    @property
    def cpus_asked(self) -> int:
        """The CPUs the job asked for (see ``asked_cpus``)."""
        if self.asked_cpus is not None:
            return self.asked_cpus
        return self.per_unit.get("cpu", 0) * self.units

    def units_of_tasks(self, tasks: int) -> int:
        """The units that ``tasks`` of this job's tasks take (a rule such as Slurm's
        ``--ntasks-per-node`` counts tasks)."""
        return -(-tasks // self.tasks_per_unit)

    @property
    def cpus_per_node(self) -> int | None:
        """The least CPUs each node of a multi-node ``-N k`` job gets (its even share)."""
        if self.one_unit_per_node and self.units > 1:
            return self.per_unit.get("cpu")
        return None

    @property
    def laid_out_by_slurm(self) -> bool:
        """Tasks free to spread: pinned to several nodes, Slurm splits them itself (one
        per node, then filling the nodes in its node order), so only that split can be
        decided (the wire's ``layout="block"``)."""
        return not (self.single_node or self.one_unit_per_node)


@dataclass(frozen=True, slots=True)
class JobRules:
    """What the site's rules say of a job beyond its size (all optional)."""

    features: str = ""
    """Required node features, Slurm's ``--constraint`` text."""
    exclusive: bool = False
    min_nodes: int | None = None
    max_nodes: int | None = None
    tasks_per_node: int | None = None
    reservation: str = ""
    dependency: str = ""
    """What it still waits for (Slurm's ``afterok:12(unfulfilled)``); "" when nothing."""
    begin: int | None = None
    """Not before this time (``--begin``), epoch seconds."""
    qos: str = ""
    account: str = ""
    blocked: str = ""
    """Another rule the workload manager says the job breaks now (a QOS or association
    limit, a partition down...), in its words; "" when none."""


@dataclass(frozen=True, slots=True)
class PartitionView:
    name: str
    nodes: tuple[str, ...]
    max_time_s: int | None = None
    max_nodes: int | None = None
    exclusive: bool = False
    """Every job takes whole nodes here (Slurm's ``OverSubscribe=EXCLUSIVE``)."""
    priority_job_factor: int = 1
    """Slurm's ``PriorityJobFactor``: the partition factor of the multifactor priority."""


@dataclass(frozen=True, slots=True)
class ReservationView:
    name: str
    nodes: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class JobView:
    id: str
    user: str
    group: str
    name: str
    partition: str
    state: str  # pending, running, completed, failed, cancelled, timeout, node_fail, other
    submit: int
    time_limit_s: int
    shape: JobShape
    held_for_us: bool = False  # pending, priority 0 and carrying the hold tag
    tagged: bool = False  # carries the hold tag (pending jobs released by us keep it)
    priority: int = 0
    reason: str = ""
    start: int | None = None
    end: int | None = None
    allocation: dict[str, int] = field(default_factory=dict)  # node → units (running)
    ending: bool = False  # running, but ended: Slurm is cleaning its nodes (COMPLETING)
    required_nodes: tuple[str, ...] = ()
    rules: JobRules = field(default_factory=JobRules)
    pin: str = ""
    """The bridge's own reservation the job is in (Slurm's split pin), never a site rule."""
    requeue: bool = False
    """The workload manager may put it back in its queue once started (Slurm's
    ``--requeue``): it may be given a trial run."""
    restarts: int = 0
    """Times it went back to the queue (Slurm's restart count)."""

    def takes_whole_nodes(self, partitions: Mapping[str, PartitionView]) -> bool:
        """Asked for (``--exclusive``), or its partition's rule."""
        return self.rules.exclusive or any(
            partitions[p].exclusive for p in self.partition.split(",") if p in partitions
        )

    def split_by_manager(
        self, partitions: Mapping[str, PartitionView], *, splits_tasks: bool, pins_splits: bool
    ) -> bool:
        """Whether the workload manager splits this job's tasks over its nodes its own
        way, so that only that split can be decided: a task job, unless the manager pins
        splits (Slurm's core reservations). A pin cannot hold a job already in a site
        reservation (a job is in one at most) nor one taking whole nodes."""
        if not self.shape.laid_out_by_slurm or not (splits_tasks or pins_splits):
            return False
        return splits_tasks or bool(self.rules.reservation) or self.takes_whole_nodes(partitions)


@dataclass(frozen=True, slots=True)
class ClusterState:
    time: int
    nodes: dict[str, NodeView]
    jobs: list[JobView]
    notes: tuple[str, ...] = ()
    partitions: dict[str, PartitionView] = field(default_factory=dict)
    reservations: tuple[ReservationView, ...] = ()
    limits: SiteLimits | None = None
    """Slurm's QOS and association limits, where the bridge reads them."""
    unreadable: tuple[tuple[str, str], ...] = ()
    """Jobs the reader could not shape, as (job id, why): left out of ``jobs``."""

    @property
    def running(self) -> list[JobView]:
        return [j for j in self.jobs if j.state == "running"]

    @property
    def pending(self) -> list[JobView]:
        return [j for j in self.jobs if j.state == "pending"]

    @property
    def held(self) -> list[JobView]:
        return [j for j in self.jobs if j.state == "pending" and j.held_for_us]

    @property
    def finished(self) -> list[JobView]:
        return [j for j in self.jobs if j.state not in {"pending", "running"}]

    @property
    def ended_after_start(self) -> list[JobView]:
        """Ended jobs that did start (one cancelled while pending did not)."""
        return [j for j in self.finished if j.start is not None]

    def job(self, job_id: str) -> JobView | None:
        return next((j for j in self.jobs if j.id == job_id), None)
