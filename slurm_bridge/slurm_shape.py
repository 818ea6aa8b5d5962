"""Turn a Slurm job's request into cpsched's identical units, and parse GRES strings.

Slurm asks in tasks, CPUs per task, memory per CPU or per node, and GRES per node, per
task or per job. cpsched asks in ``units × per_unit``. Three shapes cover what can be
started exactly by pinning a node list:

* **single node** (one task, ``-N 1``, or per-node GRES/memory on one node): one unit
  holding the whole request; the allocation is one node.
* **one unit per node** (``-N k`` with k > 1): a unit is one node's share; the job needs
  k distinct nodes (the bridge refuses an allocation that stacks two units on a node).
* **tasks** (``-n k`` free to spread): a unit is one task; any node set works, Slurm
  distributes the tasks over the pinned nodes itself.

On nodes with several hardware threads per core, Slurm's core selection
(``select/cons_tres`` with ``CR_Core…``) gives a job whole cores on each node:
``ceil(CPUs on the node / threads) × threads`` CPUs (a one-CPU job holds two on
two-thread nodes, and its memory per CPU is counted on both). A shape is then made of
whole cores, so that what the service decides is what Slurm allocates: the single-node
request and the per-node share are rounded up to whole cores, and tasks are grouped so
that one unit fills whole cores (``threads / gcd(CPUs per task, threads)`` tasks per
unit, e.g. two one-CPU tasks per unit on two-thread nodes). Where a group would break
the job's own rules, a unit is one task on whole cores (``_task_unit``). Either way the
shape never holds less than Slurm allocates; it holds more where a partial group or a
lone task leaves a thread idle, which the read-back reports. ``docs/bridge.md`` lists
what is not modelled (``CR_Socket``, ``--hint=nomultithread``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from cpsched.slurm_bridge.model import Amounts, JobShape, NodeView

_GRES_COUNT = re.compile(r"^(\d+)([KMG]?)$")
_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_gres(text: str | None) -> Amounts:
    """GRES and TRES lists → amounts by resource name; empty → {}.

    22.05 writes ``"gpu:2,gpu:a100:1(S:0),gres:fpga:1"`` (→ ``{"gpu": 3, "fpga": 1}``);
    24.11 writes TRES, ``"cpu=2"`` or ``"gres/gpu=1"``, ``"gres/gpu:a100=1"`` (→
    ``{"cpu": 2}``, ``{"gpu": 1}``): a name's type is never part of its name.
    """
    amounts: Amounts = {}
    if not text or text.strip() in {"(null)", "N/A", "None"}:
        return amounts
    for raw in re.split(r",(?![^()]*\))", text):
        item = raw.split("(", 1)[0].strip()
        for prefix in ("gres:", "gres/"):
            if item.startswith(prefix):
                item = item[len(prefix) :]
        if not item:
            continue
        named, equals, counted = item.partition("=")
        parts = named.split(":")
        name = parts[0]
        count = 1
        tail = counted if equals else parts[-1] if len(parts) > 1 else ""
        match = _GRES_COUNT.match(tail)
        if match:
            count = int(match.group(1)) * _SUFFIX[match.group(2)]
        amounts[name] = amounts.get(name, 0) + count
    return amounts


@dataclass(frozen=True, slots=True)
class SlurmRequest:
    """The request fields a shape is derived from (from JSON or text output)."""

    cpus: int
    tasks: int
    node_count: int
    max_nodes: int  # 0: not limited
    cpus_per_task: int | None
    mem_per_cpu: int | None  # MiB
    mem_per_node: int | None  # MiB
    gres_per_node: Amounts
    gres_per_task: Amounts
    gres_per_job: Amounts
    tasks_per_node: int | None = None  # --ntasks-per-node
    tasks_per_core: int | None = None  # --ntasks-per-core (1: a core per task)
    threads_per_core: int | None = None  # --threads-per-core, --hint=nomultithread: 1
    allocated: bool = False
    """``cpus`` as Slurm allocated them (a running or ended job), not as asked."""


@dataclass(frozen=True, slots=True)
class CoreRounding:
    """How Slurm rounds a job's CPUs on a node: to whole cores of ``threads`` hardware
    threads (1: not at all), each task on cores of its own with ``core_per_task``, each
    CPU asked on a core of its own with ``core_per_cpu`` (one thread used per core)."""

    threads: int = 1
    core_per_task: bool = False
    core_per_cpu: bool = False

    def on_node(self, cpus: int, tasks: int, per_task: int) -> int:
        """CPUs Slurm allocates for ``tasks`` tasks holding ``cpus`` CPUs on one node."""
        if self.core_per_cpu:
            return cpus * self.threads
        if self.core_per_task:
            return tasks * whole_cores(per_task, self.threads)
        return whole_cores(cpus, self.threads)

    def charged(self, held: int) -> int:
        """The CPUs memory per CPU is charged on, of ``held`` allocated: with a core per
        CPU asked, only those asked (seen with Slurm 22.05)."""
        return held // self.threads if self.core_per_cpu else held


NOT_ROUNDED = CoreRounding()


def whole_cores(cpus: int, threads: int) -> int:
    """``cpus`` rounded up to whole cores of ``threads`` hardware threads."""
    return -(-cpus // threads) * threads


def job_shape(req: SlurmRequest, *, rounding: CoreRounding = NOT_ROUNDED) -> JobShape:
    """The units × per_unit view of a Slurm request (see the module docstring).

    ``rounding``: how Slurm rounds CPUs to whole cores on the job's nodes
    (``WholeCores.for_job``).
    """
    req = _cpus_per_task_from_tres(req)
    tasks = max(req.tasks, 1)
    nodes = max(req.node_count, 1)
    cpus = max(req.cpus, 1)
    if req.threads_per_core == 1 and rounding.threads > 1:
        rounding = CoreRounding(rounding.threads, core_per_cpu=True)
        if req.allocated:  # a core for each CPU asked: those Slurm counts after the start
            cpus = max(1, cpus // rounding.threads)
    elif req.tasks_per_core == 1:
        rounding = CoreRounding(rounding.threads, core_per_task=True)
    per_task_cpus = req.cpus_per_task or max(1, cpus // tasks)
    per_node_only = bool(req.gres_per_node) or req.mem_per_node is not None
    if tasks == 1 or req.max_nodes == 1 or (nodes == 1 and per_node_only):
        held = rounding.on_node(cpus, tasks, per_task_cpus)
        whole: Amounts = {"cpu": held}
        if req.mem_per_cpu:
            whole["mem"] = req.mem_per_cpu * rounding.charged(held)
        elif req.mem_per_node:
            whole["mem"] = req.mem_per_node
        _add(whole, req.gres_per_node, lambda count: count)
        _add(whole, req.gres_per_task, lambda count: count * tasks)
        _add(whole, req.gres_per_job, lambda count: count)
        return JobShape(units=1, per_unit=whole, single_node=True, asked_cpus=cpus)
    if nodes > 1 and (per_node_only or req.max_nodes == nodes):
        node_cpus = rounding.on_node(
            math.ceil(cpus / nodes), math.ceil(tasks / nodes), per_task_cpus
        )
        share: Amounts = {"cpu": node_cpus}
        if req.mem_per_node:
            share["mem"] = req.mem_per_node
        elif req.mem_per_cpu:
            share["mem"] = req.mem_per_cpu * rounding.charged(node_cpus)
        _add(share, req.gres_per_node, lambda count: count)
        _add(share, req.gres_per_task, lambda count: math.ceil(count * tasks / nodes))
        _add(share, req.gres_per_job, lambda count: math.ceil(count / nodes))
        return JobShape(units=nodes, per_unit=share, one_unit_per_node=True, asked_cpus=cpus)
    group, unit_cpus = _task_unit(req, tasks, per_task_cpus, rounding)
    units = -(-tasks // group)
    unit: Amounts = {"cpu": unit_cpus}
    if req.mem_per_cpu:
        unit["mem"] = req.mem_per_cpu * rounding.charged(unit_cpus)
    elif req.mem_per_node:
        unit["mem"] = math.ceil(req.mem_per_node / tasks) * group
    _add(unit, req.gres_per_task, lambda count: count)
    _add(unit, req.gres_per_job, lambda count: math.ceil(count / units))
    return JobShape(units=units, per_unit=unit, tasks_per_unit=group, asked_cpus=cpus)


def _cpus_per_task_from_tres(req: SlurmRequest) -> SlurmRequest:
    """Slurm 24.11 records ``-c N`` as a per-task TRES, ``cpu=N``: CPUs per task, not a
    generic resource no node has."""
    if "cpu" not in req.gres_per_task:
        return req
    per_task = dict(req.gres_per_task)
    cpus = per_task.pop("cpu")
    return replace(req, gres_per_task=per_task, cpus_per_task=req.cpus_per_task or cpus)


def _task_unit(
    req: SlurmRequest, tasks: int, per_task: int, rounding: CoreRounding
) -> tuple[int, int]:
    """(tasks per unit, CPUs per unit) of a task job.

    A unit is the fewest tasks that fill whole cores (two one-CPU tasks on two-thread
    cores), which Slurm allocates exactly. Where such units would break the job's own
    rules (GRES per task, ``--ntasks-per-node`` not a whole number of units, fewer units
    than its least node count) or each task has cores of its own, a unit is one task on
    whole cores: never less than Slurm allocates, at times more. With a core per CPU
    asked, a unit is one task on a core per CPU.
    """
    threads = rounding.threads
    if rounding.core_per_cpu:
        return 1, per_task * threads
    group = threads // math.gcd(per_task, threads)
    grouped_fits = (
        group > 1
        and not rounding.core_per_task
        and not req.gres_per_task
        and (req.tasks_per_node is None or req.tasks_per_node % group == 0)
        and -(-tasks // group) >= req.node_count
    )
    if grouped_fits:
        return group, per_task * group
    return 1, whole_cores(per_task, threads)


@dataclass(frozen=True, slots=True)
class WholeCores:
    """Where Slurm allocates whole cores of several hardware threads: under
    ``select/cons_tres`` (or ``cons_res``) with ``CR_Core…``. Under ``CR_CPU`` it hands
    out single threads; ``CR_Socket`` (whole sockets) and ``select/linear`` (whole
    nodes) are not modelled: nothing is rounded there."""

    node_threads: Mapping[str, int] = field(default_factory=dict)
    """Node → hardware threads per core: ``squeue --json`` lists a running job's cores,
    read as cores × threads CPUs, as ``scontrol -d``'s ``CPU_IDs`` count them."""
    partition_threads: Mapping[str, int] = field(default_factory=dict)
    """Partition → threads per core a job there is rounded to; 1 where its nodes differ
    (a shape cannot follow two roundings)."""
    core_per_task: bool = False
    """``CR_ONE_TASK_PER_CORE``: every task has cores of its own."""

    @classmethod
    def of(cls, nodes: Mapping[str, NodeView], config: Mapping[str, str]) -> WholeCores:
        """From the nodes read and ``scontrol show config``'s values."""
        threads = {name: node.cpus_per_core for name, node in nodes.items()}
        select = config.get("SelectType", "")
        parameters = config.get("SelectTypeParameters", "").upper()
        if "cons_" not in select or "CR_CORE" not in parameters:
            return cls(node_threads=threads)
        seen: dict[str, set[int]] = {}
        for node in nodes.values():
            for partition in node.partitions:
                seen.setdefault(partition, set()).add(node.cpus_per_core)
        return cls(
            node_threads=threads,
            partition_threads={p: min(t) if len(t) == 1 else 1 for p, t in seen.items()},
            core_per_task="CR_ONE_TASK_PER_CORE" in parameters,
        )

    def for_job(self, partition: str) -> CoreRounding:
        """How a job of ``partition`` (Slurm's ``a,b`` list) is rounded; partitions the
        bridge does not manage are not looked at."""
        found = {
            self.partition_threads[p] for p in partition.split(",") if p in self.partition_threads
        }
        threads = found.pop() if len(found) == 1 else 1
        return CoreRounding(threads, self.core_per_task and threads > 1)


NO_WHOLE_CORES = WholeCores()
"""Nothing rounded and one thread per core read everywhere."""


def _add(amounts: Amounts, gres: Amounts, share: Callable[[int], int]) -> None:
    """Add ``share(count)`` of each generic resource in ``gres`` to ``amounts``."""
    for name, count in gres.items():
        amounts[name] = amounts.get(name, 0) + share(count)


def units_on_nodes(shape: JobShape, cpus_by_node: dict[str, int]) -> dict[str, int]:
    """Units of a running job on each node, from the CPUs Slurm allocated there.

    The result always sums to ``shape.units`` (the wire schema checks it): per-node CPU
    counts that do not divide evenly are rounded, and the difference is taken from (or
    given to) the nodes holding the most units.
    """
    names = list(cpus_by_node)
    if not names:
        return {}
    if shape.single_node:
        return {names[0]: 1}
    if shape.one_unit_per_node:
        if len(names) >= shape.units:
            return dict.fromkeys(names[: shape.units], 1)
        return _spread(shape.units, names)
    per_unit_cpus = max(shape.per_unit.get("cpu", 1), 1)
    counts = {n: max(1, cpus_by_node[n] // per_unit_cpus) for n in names}
    if len(names) > shape.units:  # more nodes than units: cannot give each one a unit
        return _spread(shape.units, names)
    while sum(counts.values()) > shape.units:
        counts[max(counts, key=counts.__getitem__)] -= 1
    while sum(counts.values()) < shape.units:
        counts[max(counts, key=counts.__getitem__)] += 1
    return counts


def _spread(units: int, names: list[str]) -> dict[str, int]:
    """``units`` dealt round-robin over ``names``; nodes left with none are omitted."""
    counts = dict.fromkeys(names, 0)
    for i in range(units):
        counts[names[i % len(names)]] += 1
    return {name: count for name, count in counts.items() if count}
