"""The one interface the bridge loop uses to talk to a workload manager.

Implementations: ``SlurmBackend`` (commands or slurmrestd) and ``PbsBackend``; unit
tests use a fake. Every method acts on one job and raises ``CommandError`` on failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from cpsched.slurm_bridge.model import ClusterState, JobView


@dataclass(frozen=True, slots=True)
class ExactSplit:
    """The cores a task job spread over several nodes must get on each (listed in the
    workload manager's node order): the workload manager would otherwise split its tasks
    over the nodes its own way. ``user``, ``partition`` and ``limit_s`` are the job's
    (the partition it runs in; "" for the default)."""

    user: str
    cores: Mapping[str, int]
    partition: str
    limit_s: int


class WorkloadManager(Protocol):
    name: str
    splits_tasks: bool
    """Whether it splits a task job's tasks over the pinned nodes itself (Slurm pinned
    by node list only: then only its own split can be decided) or runs an exact
    per-node allocation (PBS's ``qrun -H``; Slurm pinned by a core reservation)."""

    @property
    def pins_splits(self) -> bool:
        """Whether it makes a task job run with its decided split by pinning it (Slurm's
        core reservations, ``split_pin = "reservation"``): see
        ``JobView.split_by_manager``."""
        ...

    def read_state(self) -> ClusterState:
        """Nodes, running jobs with their allocation, pending jobs (held or not)."""
        ...

    def start(
        self,
        job_id: str,
        allocation: Mapping[str, int],
        *,
        cpus_per_node: int | None = None,
        partition: str | None = None,
        exact: ExactSplit | None = None,
    ) -> None:
        """Pin the job to exactly the nodes of ``allocation`` (units per node) and let it
        run; ``cpus_per_node``: give each node at least that many CPUs (Slurm's
        even split of a ``-N k`` job, which it would otherwise fill node by node);
        ``partition``: run it in this one of its partitions (a job submitted to several
        is started only in the first unless told: Slurm 22.05 leaves it pending with
        ``ReqNodeNotAvail`` when its nodes are in a later one); ``exact``: a task job's
        cores on each node, which it must get (a manager that runs exact allocations
        anyway has nothing more to do)."""
        ...

    def settle(self, state: ClusterState) -> list[str]:
        """Undo what pinned started jobs once it has done its work (Slurm: the core
        reservation of a job that runs, ended or was held again); the jobs settled."""
        ...

    def hold(self, job_id: str, *, unpin: bool) -> None:
        """Hold a pending job again (and forget its pinned nodes when ``unpin``)."""
        ...

    ends_trials: bool
    """Whether it can put a running job back in its queue, held for cpsched
    (:meth:`requeue_hold`): only then are jobs offered for trial runs."""

    def requeue_hold(self, job_id: str) -> None:
        """End a trial run: put the running job back in the queue, held for cpsched, its
        pinned nodes forgotten (it runs again later, from its start)."""
        ...

    def release_to_native(self, job_id: str) -> None:
        """Fallback: let the workload manager's own scheduler start this held job."""
        ...

    def extend(self, job_id: str, new_limit_s: int) -> None:
        """Set a running job's time limit (seconds from its start); only ever raise it."""
        ...

    def finished_jobs(self, state: ClusterState) -> list[JobView]:
        """Jobs that have ended (any end state) and did start, as far back as known."""
        ...

    @property
    def finished_forgeable(self) -> bool:
        """Whether ``finished_jobs`` read a text file that job names can write lines into
        (Slurm's jobcomp/filetxt): then only the ends of jobs the bridge saw are posted
        (``finished.pick_finished``)."""
        ...
