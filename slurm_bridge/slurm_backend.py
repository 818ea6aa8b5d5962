"""Slurm through its commands: squeue/sinfo (JSON or text), scontrol, sacct."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from cpsched.slurm_bridge import hostlist, slurm_text
from cpsched.slurm_bridge.backend import ExactSplit
from cpsched.slurm_bridge.errors import CommandError, SplitPinRefused, StateParseError
from cpsched.slurm_bridge.finished import parse_sacct, sacct_argv
from cpsched.slurm_bridge.limits import (
    SiteLimits,
    assoc_argv,
    hold_back_over_limits,
    parse_assocs,
    parse_qos,
    parse_qos_priority,
    qos_argv,
)
from cpsched.slurm_bridge.model import (
    ClusterState,
    JobView,
    NodeView,
    PartitionView,
    ReservationView,
)
from cpsched.slurm_bridge.refresh import Refreshed
from cpsched.slurm_bridge.runner import Runner
from cpsched.slurm_bridge.site_priority import (
    SSHARE_ARGV_TAIL,
    PriorityInputs,
    config_values,
    multifactor,
    parse_fairshare,
    weights_of,
)
from cpsched.slurm_bridge.slurm_common import (
    field_separator,
    parse_partitions,
    parse_reservations,
    partition_max_minutes,
)
from cpsched.slurm_bridge.slurm_dependency import settle_dependencies
from cpsched.slurm_bridge.slurm_json import read_jobs
from cpsched.slurm_bridge.slurm_json_doc import JsonOrigin, json_argvs
from cpsched.slurm_bridge.slurm_json_nodes import parse_nodes
from cpsched.slurm_bridge.slurm_pins import PIN_PREFIX, SplitPins, pin_apart, unreserve_pinned
from cpsched.slurm_bridge.slurm_rest import SlurmRestClient
from cpsched.slurm_bridge.slurm_shape import WholeCores
from cpsched.slurm_bridge.slurm_version import SlurmVersion, parse_version

log = logging.getLogger("slurm_bridge.slurm")

EPOCH_TIMES = {"SLURM_TIME_FORMAT": "%s"}
PARTITIONS_TTL_S = 60.0
RESERVATIONS_TTL_S = 10.0
LIMITS_TTL_S = 60.0
"""Partitions change by hand, rarely; a reservation may be made at any time, and the
bridge must not pin a job into its window for long (Slurm itself would not start it
there: it would wait on its pinned nodes until the bridge re-holds it)."""


CORE_LISTS_REFUSED = (24, 11)
"""From this version on (seen on 24.11.5), ``scontrol create reservation`` refuses
per-node core counts; an earlier release that refuses them is found at its first pin."""
NODE_COUNT_TOLD = (24, 11)
"""From this version on (seen on 24.11.5), a job started on several nodes is told their
number (``NumNodes=``) with its node list."""

REPROBE_S = 600
"""How often ``finished_source = "auto"`` tries slurmdbd again once it read elsewhere."""
DOUBTFUL_REREADS = 20
"""Jobs re-read one by one per cycle when the whole list is doubtful about them."""


@dataclass
class SlurmBackend:
    runner: Runner
    tag: str = "extsched"
    partitions: list[str] = field(default_factory=list)
    source: str = "json"  # json | text | rest
    finished_source: str = "auto"  # auto | jobcomp | sacct | squeue
    unlimited_s: int = 7 * 86400
    bin_dir: Path | None = None
    rest: SlurmRestClient | None = None
    name: str = "slurm"
    splits_tasks: bool = True
    ends_trials: bool = True  # scontrol requeuehold
    _finished_source_found: str | None = None
    _finished_failure: str | None = None  # why the source failed last, logged once
    _reprobe: int = 0  # when auto tries slurmdbd again
    _doubtful: list[str] = field(default_factory=list)  # jobs listed twice, logged once
    _reread_turn: int = 0  # where the next cycle's re-reads of doubtful jobs begin
    _partitions: Refreshed[dict[str, PartitionView]] = field(init=False)
    _reservations: Refreshed[tuple[ReservationView, ...]] = field(init=False)
    _limits: Refreshed[SiteLimits] = field(init=False)
    _config: Refreshed[dict[str, str]] = field(init=False)
    _fairshare: Refreshed[dict[tuple[str, str], float]] = field(init=False)
    _pins: SplitPins = field(init=False)
    _told_not_modelled: bool = False
    _version: SlurmVersion | None = None

    def _cmd(self, name: str) -> str:
        return str(self.bin_dir / name) if self.bin_dir else name

    def __post_init__(self) -> None:
        # Partitions change by hand, rarely; a reservation may be made at any time, and
        # the bridge must not pin a job into its window for long. Without accounting
        # there are no limits; while slurmdbd is down the last ones read are kept.
        scontrol = self._cmd("scontrol")
        self._pins = SplitPins(self.runner, scontrol)
        self._partitions = Refreshed(
            "partitions",
            PARTITIONS_TTL_S,
            lambda: parse_partitions(self.runner.run([scontrol, "-o", "show", "partition"])),
        )
        self._reservations = Refreshed(
            "reservations",
            RESERVATIONS_TTL_S,
            lambda: parse_reservations(
                self.runner.run([scontrol, "-o", "show", "reservation"], env=EPOCH_TIMES)
            ),
        )
        self._limits = Refreshed(
            "QOS and association limits", LIMITS_TTL_S, self._read_limits, keep=SiteLimits
        )
        self._config = Refreshed(
            "scontrol show config",
            LIMITS_TTL_S,
            lambda: config_values(self.runner.run([scontrol, "show", "config"])),
            keep=dict,
        )
        self._fairshare = Refreshed(
            "fair-share factors",
            LIMITS_TTL_S,
            lambda: parse_fairshare(self.runner.run([self._cmd("sshare"), *SSHARE_ARGV_TAIL])),
            keep=dict,
        )

    # ---- reading ---------------------------------------------------------------
    @property
    def slurm_version(self) -> SlurmVersion:
        """Slurm's version (``scontrol --version``), learned on the first read and logged
        then; the readers and the commands they run depend on it."""
        if self._version is None:
            argv = [self._cmd("scontrol"), "--version"]
            self._version = parse_version(self.runner.run(argv), " ".join(argv))
            log.info("Slurm %s (from %s)", self._version, " ".join(argv))
            if not self.splits_tasks and self._version.at_least(*CORE_LISTS_REFUSED):
                self._split_by_slurm(f"Slurm {self._version} takes no per-node core counts")
        return self._version

    def _split_by_slurm(self, why: str) -> None:
        """Pins cannot be made (``CoreCnt=2,3`` refused): task jobs spread over several
        nodes start on Slurm's own split from now on, which the bridge knows before it
        releases them (as with ``split_pin = "node_list"``)."""
        self.splits_tasks = True
        log.warning(
            "task jobs start on Slurm's own split (split_pin = 'node_list'): %s; a decided "
            "split cannot be pinned by a core reservation",
            why,
        )

    def _read_limits(self) -> SiteLimits:
        """QOS and association limits (``sacctmgr``)."""
        sacctmgr = self._cmd("sacctmgr")
        qos_text = self.runner.run(qos_argv(sacctmgr))
        cluster = self._config.get().get("ClusterName", "")
        assocs = parse_assocs(self.runner.run(assoc_argv(sacctmgr)), cluster)
        return SiteLimits(parse_qos(qos_text), assocs, parse_qos_priority(qos_text))

    def _priority_inputs(
        self, nodes: dict, partitions: dict[str, PartitionView], limits: SiteLimits
    ) -> PriorityInputs | None:
        """What Slurm's multifactor priority of a held job is computed from; None when the
        site does not use priority/multifactor."""
        weights = weights_of(self._config.get())
        if weights is None:
            return None
        if weights.not_modelled and not self._told_not_modelled:
            self._told_not_modelled = True
            log.warning(
                "the priority of held jobs leaves out these multifactor settings: %s",
                ", ".join(weights.not_modelled),
            )
        return PriorityInputs(
            weights=weights,
            fairshare=self._fairshare.get() if weights.fairshare else {},
            qos_priority=limits.qos_priority,
            partition_factor={n: p.priority_job_factor for n, p in partitions.items()},
            total_nodes=len(nodes),
            total_cpus=sum(node.capacity.get("cpu", 0) for node in nodes.values()),
        )

    def read_state(self) -> ClusterState:
        now = int(time.time())
        version = self.slurm_version
        partitions = self._partitions.get()
        limits = partition_max_minutes(partitions)
        notes: list[str] = []
        if self.source == "rest" and self.rest is not None:
            api = self.rest.api
            nodes_read = (self.rest.nodes(), JsonOrigin(f"slurmrestd GET {api.nodes}", version))
            jobs_read = (self.rest.jobs(), JsonOrigin(f"slurmrestd GET {api.jobs}", version))
            return self._from_json(now, nodes_read, jobs_read, partitions, notes)
        if self.source == "json":
            try:
                nodes_argv, jobs_argv = json_argvs(version, self._cmd)
                nodes_origin = JsonOrigin(_said(nodes_argv), version)
                jobs_origin = JsonOrigin(_said(jobs_argv), version)
                nodes_read = _load(self.runner.run(nodes_argv), nodes_origin)
                jobs_read = _load(self.runner.run(jobs_argv), jobs_origin)
                return self._from_json(now, nodes_read, jobs_read, partitions, notes)
            except (CommandError, StateParseError) as exc:
                # Slurm built without JSON support, or JSON in a format not read (the
                # error names the command and the version): keep going with the text.
                log.warning("JSON state unavailable, using text formats: %s", exc)
                notes.append("json unavailable; text fallback")
        nodes = slurm_text.parse_nodes(
            self.runner.run(slurm_text.sinfo_argv(self._cmd("sinfo"))), self.partitions
        )
        # scontrol first, so that squeue lists every job it does, with their free text.
        # A job submitted since may be missing there, and a copy of its line in another
        # job's free text would be its only line: one submitted in a later second waits
        # for the next read (submit times are in seconds; a job held at its submission is
        # read in the cycle its submission starts).
        before = int(time.time()) + 1
        show_job = self._show_job()
        separator = field_separator()
        squeue = self.runner.run(
            slurm_text.squeue_argv(self._cmd("squeue"), separator), env=EPOCH_TIMES
        )
        known = slurm_text.squeue_free_text(squeue, separator, submitted_before=before)
        extras = self._settle_doubtful(slurm_text.job_extras(show_job, known), known)
        jobs = slurm_text.parse_jobs(
            squeue,
            separator=separator,
            extras=extras,
            tag=self.tag,
            partitions=self.partitions,
            partition_max=limits,
            unlimited_s=self.unlimited_s,
            cores=self._whole_cores(nodes),
            estimated_limits=self.slurm_version.at_least(23, 11),
        )
        return self._state(now, nodes, jobs, partitions, notes)

    def _show_job(self, job: str | None = None) -> str:
        argv = [self._cmd("scontrol"), "-o", "-d", "show", "job"]
        return self.runner.run([*argv, job] if job else argv, env=EPOCH_TIMES)

    def _settle_doubtful(
        self, extras: dict[str, slurm_text.JobExtras], known: Mapping[str, slurm_text.FreeText]
    ) -> dict[str, slurm_text.JobExtras]:
        """Read jobs whose line came twice (or under another name) on their own, where no
        other job's free text can copy it: ``DOUBTFUL_REREADS`` a cycle, taking turns so
        that many copies cannot keep one job in doubt. Say once which stay doubtful."""
        doubtful = sorted(key for key, extra in extras.items() if extra.doubtful)
        turn = self._reread_turn % len(doubtful) if doubtful else 0
        for key in (doubtful[turn:] + doubtful[:turn])[:DOUBTFUL_REREADS]:
            try:
                alone = slurm_text.job_extras(self._show_job(key), known).get(key)
            except CommandError:  # ended meanwhile
                continue
            if alone is not None:
                extras[key] = alone
        self._reread_turn = turn + DOUBTFUL_REREADS
        still = [key for key in doubtful if extras[key].doubtful]
        if still and still != self._doubtful:
            log.warning(
                "scontrol show job gives jobs %s more than once or under another name "
                "(another job's free text holds copies of their lines); read on their own "
                "%d a cycle in turn, they are not taken for jobs held for cpsched until "
                "read clearly",
                ",".join(still),
                DOUBTFUL_REREADS,
            )
        self._doubtful = still
        return extras

    def _state(
        self,
        now: int,
        nodes: dict,
        jobs: list[JobView],
        partitions: dict[str, PartitionView],
        notes: list[str],
        unreadable: tuple[tuple[str, str], ...] = (),
    ) -> ClusterState:
        limits = self._limits.get()
        jobs = settle_dependencies(jobs, now)
        jobs = hold_back_over_limits([pin_apart(job) for job in jobs], limits)
        inputs = self._priority_inputs(nodes, partitions, limits)
        if inputs is not None:  # the priority Slurm would give the jobs it holds for us
            jobs = [
                replace(job, priority=multifactor(job, now, inputs)) if job.held_for_us else job
                for job in jobs
            ]
        site = tuple(r for r in self._reservations.get() if not r.name.startswith(PIN_PREFIX))
        return ClusterState(
            time=now,
            nodes=unreserve_pinned(nodes, jobs, site, now),
            jobs=jobs,
            notes=tuple(notes),
            partitions=partitions,
            reservations=site,
            limits=limits,
            unreadable=unreadable,
        )

    def _from_json(
        self,
        now: int,
        nodes_read: tuple[dict, JsonOrigin],
        jobs_read: tuple[dict, JsonOrigin],
        partitions: dict[str, PartitionView],
        notes: list[str],
    ) -> ClusterState:
        """The state from a nodes and a jobs document, each with where it came from."""
        nodes = parse_nodes(nodes_read[0], self.partitions, origin=nodes_read[1])
        found = read_jobs(
            jobs_read[0],
            tag=self.tag,
            partitions=self.partitions,
            partition_max=partition_max_minutes(partitions),
            unlimited_s=self.unlimited_s,
            cores=self._whole_cores(nodes),
            origin=jobs_read[1],
        )
        return self._state(now, nodes, found.jobs, partitions, notes, found.unreadable)

    def _whole_cores(self, nodes: dict[str, NodeView]) -> WholeCores:
        """Where Slurm allocates whole cores (jobs there are shaped in whole cores)."""
        return WholeCores.of(nodes, self._config.get())

    # ---- acting ----------------------------------------------------------------
    def start(
        self,
        job_id: str,
        allocation: Mapping[str, int],
        *,
        cpus_per_node: int | None = None,
        partition: str | None = None,
        exact: ExactSplit | None = None,
    ) -> None:
        scontrol = self._cmd("scontrol")
        update = [
            scontrol,
            "update",
            f"JobId={job_id}",
            f"NodeList={hostlist.join(list(allocation))}",
        ]
        if cpus_per_node is not None:
            # TasksPerNode= would not do it: Slurm 22.05 records it and still fills the
            # first node (-N 2 -n 10 ran 7 + 3 on the test bed); MinCPUsNode= splits evenly.
            update.append(f"MinCPUsNode={cpus_per_node}")
        if len(allocation) > 1 and self.slurm_version.at_least(*NODE_COUNT_TOLD):
            # 24.11 holds a held job to the node count it shows for it unless told: a -n 2
            # job pinned to two nodes ran on one of them, and one given MinCPUsNode= alone
            # was rewritten to fewer CPUs in all (NumCPUs=5 for -n 9)
            update.append(f"NumNodes={len(allocation)}")
        if partition is not None:
            update.append(f"Partition={partition}")
        pin = None
        if exact is not None and self.pins_splits:
            try:
                pin = self._pins.pin(job_id, exact)
            except SplitPinRefused as exc:
                self._split_by_slurm(f"scontrol refused CoreCnt=a,b ({exc.stderr[:120]})")
                raise  # held still: the next cycle decides it on Slurm's split
        if pin is not None:
            update.append(f"Reservation={pin}")
        try:
            self.runner.run(update)
            self.runner.run([scontrol, "release", job_id])
        except CommandError:
            if pin is not None:  # it stays held: its pin goes
                self._pins.try_unpin(job_id, attached=True)
            raise

    @property
    def pins_splits(self) -> bool:
        return not self.splits_tasks

    @property
    def finished_forgeable(self) -> bool:
        return self._finished_source_found == "jobcomp"

    def settle(self, state: ClusterState) -> list[str]:
        return self._pins.settle(state)

    def hold(self, job_id: str, *, unpin: bool) -> None:
        scontrol = self._cmd("scontrol")
        self.runner.run([scontrol, "hold", job_id])
        if unpin:
            self.runner.run([scontrol, "update", f"JobId={job_id}", "NodeList="])

    def requeue_hold(self, job_id: str) -> None:
        scontrol = self._cmd("scontrol")
        # Held with its hold tag kept (AdminComment), so that it is cpsched's again; the
        # node list it was pinned to would bind the job's next start: forgotten.
        self.runner.run([scontrol, "requeuehold", job_id])
        self.runner.run([scontrol, "update", f"JobId={job_id}", "NodeList="])

    def release_to_native(self, job_id: str) -> None:
        self.runner.run([self._cmd("scontrol"), "release", job_id])

    def extend(self, job_id: str, new_limit_s: int) -> None:
        minutes = math.ceil(new_limit_s / 60)
        # slurmrestd 24.11 refuses an update addressed to an array element (123_4)
        if self.rest is not None and self.source == "rest" and "_" not in job_id:
            self.rest.set_time_limit(job_id, minutes)
            return
        self.runner.run(
            [self._cmd("scontrol"), "update", f"JobId={job_id}", f"TimeLimit={minutes}"]
        )

    # ---- finished jobs -----------------------------------------------------------
    def finished_jobs(self, state: ClusterState) -> list[JobView]:
        """From slurmdbd first (its records are the controller's), then the jobcomp file
        (which job names can write lines into), then ``squeue -t all``. With ``auto``,
        slurmdbd is tried again every ``REPROBE_S`` when another source was settled on."""
        source = self._finished_source_found or self.finished_source
        if self.finished_source == "auto" and source != "sacct" and state.time >= self._reprobe:
            source, self._reprobe = "auto", state.time + REPROBE_S
        candidates = ["sacct", "jobcomp", "squeue"] if source == "auto" else [source]
        for candidate in candidates:
            if candidate == "squeue":
                self._settle_finished(candidate, state.time)
                return state.ended_after_start
            separator = field_separator()
            try:
                out = self.runner.run(
                    sacct_argv(self._cmd("sacct"), separator, jobcomp=candidate == "jobcomp"),
                    env=EPOCH_TIMES,
                )
                jobs = parse_sacct(
                    out,
                    separator,
                    partitions=self.partitions,
                    unlimited_s=self.unlimited_s,
                    now=state.time,
                )
            except (CommandError, StateParseError) as exc:
                if source == "auto":
                    log.info("finished jobs: %s not usable (%s)", candidate, exc)
                    continue
                # A source can fail for good: Slurm 22.05's sacct -c dies on a jobcomp
                # line without a state or times, which a job's name can write. The loop
                # still posts the ended jobs squeue -t all lists.
                failure = f"{candidate}: {getattr(exc, 'reason', type(exc).__name__)}"
                if failure != self._finished_failure:  # the message varies with the run
                    log.error("finished jobs: %s failed: %s", candidate, exc)
                self._finished_failure = failure
                raise
            self._settle_finished(candidate, state.time)
            return jobs
        return []

    def _settle_finished(self, source: str, now: int) -> None:
        if source != self._finished_source_found:
            self._reprobe = now + REPROBE_S
        self._finished_source_found = source
        self._finished_failure = None


def _said(argv: list[str]) -> str:
    """A command as errors name it: its program's name and arguments."""
    return " ".join([Path(argv[0]).name, *argv[1:]])


def _load(text: str, origin: JsonOrigin) -> tuple[dict, JsonOrigin]:
    """A command's JSON document, with where it came from."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise origin.error({}, f"printed invalid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise origin.error({}, f"printed {type(doc).__name__}, not an object")
    return doc, origin
