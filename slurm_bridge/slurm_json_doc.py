"""Slurm's JSON documents: which commands print them, which format one is in, and its
numbers, for the readers of jobs (``slurm_json``) and nodes (``slurm_json_nodes``).

The formats read:

* ``v0.0.38``: Slurm 22.05's openapi v0.0.38 (``sinfo --json``, ``squeue --json``,
  slurmrestd's ``/slurm/v0.0.38``). Numbers are plain (``null``: not set), states words.
* ``v0.0.40``, ``v0.0.41``, ``v0.0.42``: the data_parser plugins of Slurm 23.11-24.11
  (``squeue --json``, ``scontrol --json show nodes``, slurmrestd's ``/slurm/v0.0.4x/``).
  Numbers are ``{"set", "infinite", "number"}``, states lists of flags.

A document says its format in ``meta.plugin`` (``type: openapi/v0.0.38`` or
``data_parser: data_parser/v0.0.42``); one in another format is an error naming the
command and Slurm's version, never read as if it were one of these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cpsched.slurm_bridge.errors import StateParseError
from cpsched.slurm_bridge.slurm_version import SlurmVersion

Doc = Mapping[str, Any]

READ_FORMATS = ("v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42")
NEWER_FORMATS = READ_FORMATS[1:]
"""The data_parser formats (Slurm 23.11 on), as opposed to 22.05's v0.0.38."""


@dataclass(frozen=True, slots=True)
class JsonOrigin:
    """Where a document came from, for the readers' errors: the command (or slurmrestd
    request) and Slurm's version as the bridge learned it (None: from the document)."""

    command: str
    version: SlurmVersion | None = None

    def slurm(self, doc: Doc) -> str:
        """Slurm's version: as learned, else as the document's ``meta`` gives it."""
        if self.version is not None:
            return str(self.version)
        meta = doc.get("meta") if isinstance(doc, Mapping) else None
        meta = meta if isinstance(meta, Mapping) else {}
        slurm = meta.get("slurm") or meta.get("Slurm") or {}
        version = slurm.get("version") if isinstance(slurm, Mapping) else None
        if isinstance(version, Mapping) and {"major", "minor", "micro"} <= set(version):
            return f"{version['major']}.{str(version['minor']).zfill(2)}.{version['micro']}"
        return "version unknown"

    def error(self, doc: Doc, message: str) -> StateParseError:
        return StateParseError(f"{self.command} (Slurm {self.slurm(doc)}): {message}")


def data_format(doc: Doc, origin: JsonOrigin) -> str:
    """The format of ``doc`` (one of ``READ_FORMATS``), from its ``meta.plugin``."""
    meta = doc.get("meta")
    plugin = meta.get("plugin") if isinstance(meta, Mapping) else None
    if not isinstance(plugin, Mapping):
        raise origin.error(doc, "the JSON has no meta.plugin saying its format")
    named = str(plugin.get("data_parser") or plugin.get("type") or "")
    found = named.rpartition("/")[2]
    if found not in READ_FORMATS:
        raise origin.error(
            doc,
            f"the JSON is in format {named!r}, which the bridge does not read (it reads "
            "openapi v0.0.38 of Slurm 22.05 and data_parser v0.0.40-v0.0.42 of Slurm "
            "23.11-24.11)",
        )
    return found


def records(doc: Doc, key: str, origin: JsonOrigin, hint: str = "") -> list[Any]:
    """The list under ``key`` at the top of ``doc``: a document without it is an error
    for the whole read."""
    found = doc.get(key)
    if not isinstance(found, list):
        raise origin.error(doc, f"the JSON has no {key!r} list{hint}")
    return found


def number(value: Any) -> int | None:
    """A number: plain in v0.0.38 (null: not set), ``{"set", "infinite", "number"}`` in
    the data_parser formats (not set, or infinite: None)."""
    if isinstance(value, Mapping):
        if value.get("set") and not value.get("infinite") and "number" in value:
            return int(value["number"])
        return None
    return None if value is None else int(value)


def json_argvs(version: SlurmVersion, cmd: Callable[[str], str]) -> tuple[list[str], list[str]]:
    """The commands the JSON source runs on ``version``: (nodes, jobs). 22.05: ``sinfo
    --json`` (it lists each node) and ``squeue --json``; from 23.11 on: ``scontrol --json
    show nodes`` (``sinfo --json`` gives node groups there) and ``squeue --json``, both in
    the newest data_parser format read (``SlurmVersion.json_format``). 22.05 lists every
    job it knows whatever the options; 24.11 applies squeue's state filter to JSON too,
    whose default leaves out ended jobs (the dependencies and ends the bridge reads):
    ``--states=all``."""
    if not version.has_data_parser:
        return [cmd("sinfo"), "--json"], [cmd("squeue"), "-a", "--json"]
    asked = f"--json={version.json_format}"
    return [cmd("scontrol"), asked, "show", "nodes"], [
        cmd("squeue"),
        "-a",
        "--states=all",
        asked,
    ]
