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
* a job still runs in its reservation when it ends: Slurm ends the job with it
  (``TIMEOUT``, "Reservation ended"), so a pin lasts for ever (``Duration=UNLIMITED``)
  and is taken off a running job (``Reservation=``) before being deleted;
* a reservation a job still uses cannot be deleted ("in use");
* ``PURGE_COMP`` deletes a reservation no job has used for a while: the safety net
  when the bridge is down as a pinned job ends.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from cpsched.slurm_bridge.errors import CommandError
from cpsched.slurm_bridge.model import ClusterState, JobView
from cpsched.slurm_bridge.runner import Runner

log = logging.getLogger("slurm_bridge.slurm")

PIN_PREFIX = "cpsched-pin-"
"""Names of the bridge's own reservations (never sent to the service as site rules)."""
PURGE_AFTER = "00:01:00"
"""Slurm deletes a pin no job has used for this long (the bridge deletes it sooner)."""


def pin_name(job_id: str) -> str:
    return f"{PIN_PREFIX}{job_id}"


def create_argv(scontrol: str, job_id: str, cores: Mapping[str, int], user: str) -> list[str]:
    """``scontrol create reservation`` holding ``cores`` (per node, in Slurm's node order:
    that is how Slurm reads the counts) for ``user``'s job."""
    nodes = list(cores)
    return [
        scontrol,
        "create",
        "reservation",
        f"ReservationName={pin_name(job_id)}",
        "StartTime=now",
        "Duration=UNLIMITED",
        f"Nodes={','.join(nodes)}",
        f"CoreCnt={','.join(str(cores[n]) for n in nodes)}",
        f"Users={user}",
        f"Flags=PURGE_COMP={PURGE_AFTER}",
    ]


def pin_apart(job: JobView) -> JobView:
    """A job as Slurm lists it, its pin (Slurm's reservation name) moved from the site's
    rules to ``pin``: the service must not plan a job into a reservation it is not sent."""
    if not job.rules.reservation.startswith(PIN_PREFIX):
        return job
    return replace(job, rules=replace(job.rules, reservation=""), pin=job.rules.reservation)


@dataclass
class SplitPins:
    """Makes and removes the bridge's pin reservations."""

    runner: Runner
    scontrol: str
    _dropped: set[str] = field(default_factory=set)
    """Pins already deleted whose ended jobs Slurm still lists with them."""

    def pin(self, job_id: str, cores: Mapping[str, int], user: str) -> str:
        """Create the job's pin and return its name. A pin left from an earlier try
        (the bridge stopped between creating it and releasing the job) is replaced."""
        argv = create_argv(self.scontrol, job_id, cores, user)
        try:
            self.runner.run(argv)
        except CommandError as exc:
            if "Duplicate" not in f"{exc.reason} {exc.stderr}":
                raise
            self.runner.run([self.scontrol, "delete", "reservation", pin_name(job_id)])
            self.runner.run(argv)
        self._dropped.discard(pin_name(job_id))
        return pin_name(job_id)

    def unpin(self, job_id: str, *, attached: bool) -> None:
        """Delete the job's pin, first taking it off the job when ``attached`` (a job
        still in a reservation cannot have it deleted). Once taken off, the pin is not
        tried again: if deleting it fails, Slurm's ``PURGE_COMP`` removes it."""
        if attached:
            self.runner.run([self.scontrol, "update", f"JobId={job_id}", "Reservation="])
        self._dropped.add(pin_name(job_id))
        self.runner.run([self.scontrol, "delete", "reservation", pin_name(job_id)])

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
            try:
                self.unpin(job.id, attached=job.state in {"pending", "running"})
            except CommandError as exc:
                log.warning("pin reservation not removed", extra={"job": job.id, "error": str(exc)})
                continue
            settled.append(job.id)
        self._dropped &= listed
        return settled
