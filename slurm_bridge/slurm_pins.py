"""Core reservations that make Slurm run a task job with exactly its decided split.

Pinned by node list only, a task job (``sbatch -n k``) gets Slurm's own split of its
tasks over the nodes, and that split follows the room on each node at the moment Slurm
allocates it. A job in a core reservation can use only the reservation's cores, and
with ``Nodes=`` and one ``CoreCnt=`` per node a reservation holds a given number of
cores on each node: the job then runs on exactly those counts, whatever ends meanwhile
(checked on the test bed: ``-n 5`` on two idle 4-CPU nodes ran 3 + 2 in a 3 + 2
reservation, where Slurm alone makes it 4 + 1).

Facts of Slurm 22.05 this module is built on, each checked on the test bed:

* ``CoreCnt=`` counts go to the nodes in Slurm's node order, not in the order given;
* a job in a reservation that ends is ended with it (``TIMEOUT``, "Reservation
  ended"), so a pin lasts the job's limit and a margin, is taken off a running job
  (``Reservation=``) before being deleted, and a job still in its pin is not extended;
* a reservation a job still uses cannot be deleted ("in use");
* ``PURGE_COMP`` deletes a reservation no job has used for a while: the safety net
  when the bridge is down as a pinned job ends.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace

from cpsched.slurm_bridge.backend import ExactSplit
from cpsched.slurm_bridge.errors import CommandError, SplitPinRefused
from cpsched.slurm_bridge.model import ClusterState, JobView, NodeView, ReservationView
from cpsched.slurm_bridge.runner import Runner

log = logging.getLogger("slurm_bridge.slurm")

PIN_PREFIX = "cpsched-pin-"
"""Names of the bridge's own reservations (never sent to the service as site rules)."""
PURGE_AFTER = "00:01:00"
"""Slurm deletes a pin no job has used for this long (the bridge deletes it sooner)."""
PIN_MARGIN_MIN = 2
"""A pin lasts the job's limit and this many minutes: Slurm would end the job with its
pin, and the bridge takes the pin off long before (and before extending the job); the
margin covers a released job starting up to ``pin_grace_s`` late. Not longer: a pin
overlapping a site reservation planned on its nodes cannot be made."""


CORE_LISTS_GONE = "comma separated array for CoreCnt is no longer valid"
"""What Slurm 24.11's scontrol says of ``CoreCnt=2,3`` (a per-node list)."""


def pin_name(job_id: str) -> str:
    return f"{PIN_PREFIX}{job_id}"


def create_argv(scontrol: str, job_id: str, exact: ExactSplit) -> list[str]:
    """``scontrol create reservation`` holding ``exact.cores`` (per node, in Slurm's node
    order: that is how Slurm reads the counts) for the job's user, in its partition (a
    cluster may have no default one), for as long as the job may run and a margin."""
    nodes = list(exact.cores)
    minutes = math.ceil(exact.limit_s / 60) + PIN_MARGIN_MIN
    argv = [
        scontrol,
        "create",
        "reservation",
        f"ReservationName={pin_name(job_id)}",
        "StartTime=now",
        f"Duration={minutes}",
        f"Nodes={','.join(nodes)}",
        f"CoreCnt={','.join(str(exact.cores[n]) for n in nodes)}",
        f"Users={exact.user}",
        f"Flags=PURGE_COMP={PURGE_AFTER}",
    ]
    if exact.partition:
        argv.append(f"PartitionName={exact.partition}")
    return argv


def pin_apart(job: JobView) -> JobView:
    """A job as Slurm lists it, its pin (Slurm's reservation name) moved from the site's
    rules to ``pin``: the service must not plan a job into a reservation it is not sent."""
    if not job.rules.reservation.startswith(PIN_PREFIX):
        return job
    return replace(job, rules=replace(job.rules, reservation=""), pin=job.rules.reservation)


def unreserve_pinned(
    nodes: dict[str, NodeView], jobs: list[JobView], site: tuple[ReservationView, ...], now: int
) -> dict[str, NodeView]:
    """The nodes as the bridge may use them: Slurm flags every node of an active
    reservation RESERVED, a pin's included (seen a few seconds after one is made), though
    a pin holds only its own cores, which its job's allocation (or, before it runs, its
    promise) already counts. A node reserved only by pins is up; one in a site
    reservation stays reserved."""
    pinned = {n for job in jobs if job.pin for n in (job.allocation or job.required_nodes)}
    reserved = {n for r in site if r.start <= now < r.end for n in r.nodes}
    return {
        name: replace(node, state="up")
        if node.state == "reserved" and name in pinned and name not in reserved
        else node
        for name, node in nodes.items()
    }


@dataclass
class SplitPins:
    """Makes and removes the bridge's pin reservations."""

    runner: Runner
    scontrol: str
    _dropped: set[str] = field(default_factory=set)
    """Pins deleted (or off their jobs and left to ``PURGE_COMP``) whose jobs Slurm may
    still list with them (an ended job keeps its reservation's name)."""

    def pin(self, job_id: str, exact: ExactSplit) -> str:
        """Create the job's pin and return its name. A pin left from an earlier try
        (the bridge stopped between creating it and releasing the job) is replaced."""
        argv = create_argv(self.scontrol, job_id, exact)
        try:
            self.runner.run(argv)
        except CommandError as exc:
            said = f"{exc.reason} {exc.stderr}"
            if CORE_LISTS_GONE in said:
                raise SplitPinRefused(exc.argv, exc.reason, exc.stderr) from None
            if "Duplicate" not in said:
                raise
            self.runner.run([self.scontrol, "delete", "reservation", pin_name(job_id)])
            self.runner.run(argv)
        self._dropped.discard(pin_name(job_id))
        return pin_name(job_id)

    def unpin(self, job_id: str, *, attached: bool) -> None:
        """Delete the job's pin, first taking it off the job when ``attached`` (a job
        still in a reservation cannot have it deleted). A pin off its job is tried once:
        if the delete fails, Slurm's ``PURGE_COMP`` removes it a minute later. A pin that
        could not be taken off its job is tried again next cycle (the job would end with
        it)."""
        failed: CommandError | None = None
        if attached:
            try:
                self.runner.run([self.scontrol, "update", f"JobId={job_id}", "Reservation="])
            except CommandError as exc:  # it may have ended meanwhile: try the delete
                failed = exc
        try:
            self.runner.run([self.scontrol, "delete", "reservation", pin_name(job_id)])
        except CommandError as exc:
            if failed is None:  # off the job (or no job in it): PURGE_COMP takes it
                self._dropped.add(pin_name(job_id))
            raise failed or exc from None
        self._dropped.add(pin_name(job_id))

    def try_unpin(self, job_id: str, *, attached: bool) -> bool:
        """:meth:`unpin`, a failure logged rather than raised; whether it went."""
        try:
            self.unpin(job_id, attached=attached)
        except CommandError as exc:
            log.warning("pin reservation not removed", extra={"job": job_id, "error": str(exc)})
            return False
        return True

    def settle(self, state: ClusterState) -> list[str]:
        """Delete the pins whose work is done: the job runs (its cores are its own now),
        ended, or was held again. A released job that still waits keeps its pin."""
        settled: list[str] = []
        listed: set[str] = set()
        for job in state.jobs:
            name = job.pin
            if not name:
                continue
            listed.add(name)
            if name in self._dropped or (job.state == "pending" and not job.held_for_us):
                continue
            attached = job.state == "pending" or (job.state == "running" and not job.ending)
            if self.try_unpin(job.id, attached=attached):
                settled.append(job.id)
        self._dropped &= listed
        return settled
