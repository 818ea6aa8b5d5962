"""Dispatch instances as data: every call a replay makes, written to a file and read back.

One gzip JSON-lines file per replay, self-describing (``FORMAT``, ``VERSION``)::

    {"format": "cpsched-instances", "version": 1, "resource_names": [...],
     "nodes": [[name, [capacity...]], ...], "meta": {...}}        first line: the machine
    {"kind": "jobs", "jobs": [[id, submit, limit, units, [unit request], user, group,
                               name, queue], ...]}                jobs not written before
    {"kind": "instance", "index": i, "time": t, "queued": [id...],
     "running": [[id, start, limit, [[node, units]...], extensions]...],
     "durations": [d of each queued job..., d of each running job...]}

A job is written once, before the first instance that holds it, and referred to by id
after that: consecutive calls share most of their queue, so repeating the jobs would
make Curie dumps many times larger. The snapshot's free capacity is not stored; the
loader derives it from the allocations (``make_snapshot``), as the replay tracks it.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.problem import Decision, Job, Node, RunningJob, Snapshot, make_snapshot
from cpsched.errors import InputError

FORMAT = "cpsched-instances"
VERSION = 1
SUFFIX = ".instances.jsonl.gz"
_INSTANCE_PREFIX = '{"kind":"instance","index":'
"""How the writer starts an instance line (compact JSON, keys in this order)."""


@dataclass(frozen=True, slots=True)
class Instance:
    """One dispatch call: what the dispatcher was given."""

    index: int
    snapshot: Snapshot
    durations: dict[str, int]
    """Durations of the queued and running jobs, as the dispatcher saw them."""


def dump_path(directory: Path, trace: str, dispatcher: str) -> Path:
    """Where a replay of ``trace`` with ``dispatcher`` writes its instances."""
    stem = trace.removesuffix(".gz").removesuffix(".swf")
    return directory / f"{stem}.{dispatcher}{SUFFIX}"


def _job_row(job: Job) -> list[Any]:
    return [
        job.id,
        job.submit,
        job.time_limit,
        job.units,
        list(job.unit_request),
        job.user,
        job.group,
        job.name,
        job.queue,
    ]


def _job_of(row: list[Any]) -> Job:
    jid, submit, limit, units, ureq, user, group, name, queue = row
    return Job(jid, submit, limit, units, tuple(ureq), user, group, name, queue)


class InstanceWriter:
    """Writes instances to one file; use as a context manager (the file is gzip)."""

    def __init__(
        self,
        path: Path,
        resource_names: tuple[str, ...],
        nodes: tuple[Node, ...],
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.nodes = nodes
        self.resource_names = resource_names
        self.count = 0
        self._seen: set[str] = set()
        # Closed by close() / __exit__: the writer outlives any one with-block of its owner.
        self._file: IO[str] = gzip.open(path, "wt", encoding="utf-8", compresslevel=6)  # noqa: SIM115
        header = {
            "format": FORMAT,
            "version": VERSION,
            "resource_names": list(resource_names),
            "nodes": [[n.name, list(n.capacity)] for n in nodes],
            "meta": dict(meta or {}),
        }
        self._line(header)

    def _line(self, record: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(record, separators=(",", ":")))
        self._file.write("\n")

    def write(self, snapshot: Snapshot, durations: Durations) -> None:
        if snapshot.nodes is not self.nodes and snapshot.nodes != self.nodes:
            raise InputError(
                f"instance {self.count} has other nodes than the file's header: one "
                "instance file holds one machine; write another file for another machine"
            )
        jobs = [*snapshot.queued, *(rj.job for rj in snapshot.running)]
        new = [job for job in jobs if job.id not in self._seen]
        if new:
            self._seen.update(job.id for job in new)
            self._line({"kind": "jobs", "jobs": [_job_row(job) for job in new]})
        running = [
            [rj.job.id, rj.start, rj.time_limit, [list(a) for a in rj.allocation], rj.extensions]
            for rj in snapshot.running
        ]
        self._line(
            {
                "kind": "instance",
                "index": self.count,
                "time": snapshot.time,
                "queued": [job.id for job in snapshot.queued],
                "running": running,
                "durations": [durations[job.id] for job in jobs],
            }
        )
        self.count += 1

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> InstanceWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


class RecordingDispatcher:
    """A dispatcher that writes each call's instance, then asks ``inner`` to decide."""

    def __init__(self, inner: Dispatcher, writer: InstanceWriter) -> None:
        self.inner = inner
        self.writer = writer
        self.name = inner.name

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        self.writer.write(snapshot, durations)
        return self.inner.decide(snapshot, durations)


@dataclass(frozen=True, slots=True)
class InstanceFile:
    """An instance file's header; ``instances()`` reads the calls in order."""

    path: Path
    resource_names: tuple[str, ...]
    nodes: tuple[Node, ...]
    meta: dict[str, Any]

    def instances(self, keep: Callable[[int], bool] | None = None) -> Iterator[Instance]:
        """The instances in call order; with ``keep``, only those whose index it accepts
        (the others are not even parsed: a Curie dump holds 100 MB of running jobs)."""
        jobs: dict[str, Job] = {}
        with gzip.open(self.path, "rt", encoding="utf-8") as lines:
            next(lines)  # the header, read by open_instances
            for number, line in enumerate(lines, start=2):
                if keep is not None and line.startswith(_INSTANCE_PREFIX):
                    index = int(
                        line[len(_INSTANCE_PREFIX) : line.index(",", len(_INSTANCE_PREFIX))]
                    )
                    if not keep(index):
                        continue
                record = json.loads(line)
                kind = record.get("kind")
                if kind == "jobs":
                    for row in record["jobs"]:
                        job = _job_of(row)
                        jobs[job.id] = job
                elif kind == "instance":
                    yield self._instance(record, jobs)
                else:
                    raise InputError(
                        f"{self.path}:{number}: unknown record kind {kind!r}; the file is "
                        f"damaged or not a {FORMAT} file"
                    )

    def _instance(self, record: dict[str, Any], jobs: dict[str, Job]) -> Instance:
        queued = [jobs[jid] for jid in record["queued"]]
        running = [
            RunningJob(jobs[jid], start, limit, tuple((n, u) for n, u in alloc), extensions)
            for jid, start, limit, alloc, extensions in record["running"]
        ]
        ids = [*(j.id for j in queued), *(rj.job.id for rj in running)]
        durations = dict(zip(ids, record["durations"], strict=True))
        snapshot = make_snapshot(record["time"], self.resource_names, self.nodes, running, queued)
        return Instance(record["index"], snapshot, durations)


def open_instances(path: Path) -> InstanceFile:
    """Read ``path``'s header; raises ``InputError`` if it is not an instance file this
    version can read."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            header = json.loads(next(lines))
    except (OSError, EOFError, StopIteration, json.JSONDecodeError) as error:
        raise InputError(
            f"{path} is not a gzip JSON-lines instance file ({error}); write one with "
            "`cpsched replay ... --dump-instances DIR`"
        ) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InputError(f"{path} is not a {FORMAT} file (no such format field in its header)")
    if header.get("version") != VERSION:
        raise InputError(
            f"{path} has {FORMAT} version {header.get('version')}; this cpsched reads version "
            f"{VERSION}: dump the instances again with this version"
        )
    nodes = tuple(Node(name, tuple(capacity)) for name, capacity in header["nodes"])
    return InstanceFile(path, tuple(header["resource_names"]), nodes, header.get("meta", {}))


def instance_files(where: Path) -> list[Path]:
    """The instance files under ``where`` (a directory), or ``where`` itself (a file)."""
    if where.is_file():
        return [where]
    found = sorted(where.glob(f"*{SUFFIX}"))
    if not found:
        raise InputError(
            f"no *{SUFFIX} file in {where}; dump some with `cpsched replay ... "
            f"--dump-instances {where}`"
        )
    return found
