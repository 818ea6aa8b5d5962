"""Traces travel with the sweep: the client reads each trace once and ships its bytes.

Workers need no shared file system and no copy of the traces: a cell gets the trace's
files (the SWF, compressed as it is, and its ``.gres.csv`` sidecar when there is one)
from the cluster's memory and writes them once per machine under the system's
temporary directory, in a folder named by their SHA-256, under their own names (the
summary records the trace's file name, so a cell's summary is the one ``cpsched replay``
writes). A worker that already has the files checks them byte for byte.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cpsched.replay.outputs import atomic_target
from cpsched.replay.swf_sidecar import sidecar_path

STAGING = "cpsched-sweep"
"""Folder under the system's temporary directory where workers keep shipped traces."""


@dataclass(frozen=True, slots=True)
class TraceBundle:
    """A trace's files as (name, bytes) pairs, with their digest."""

    files: tuple[tuple[str, bytes], ...]
    digest: str

    @classmethod
    def read(cls, path: Path) -> TraceBundle:
        """The trace at ``path`` and its sidecar, if any."""
        paths = [path, *[p for p in (sidecar_path(path),) if p.is_file()]]
        files = tuple((p.name, p.read_bytes()) for p in paths)
        sha = hashlib.sha256()
        for name, data in files:
            sha.update(f"{name}\0{len(data)}\0".encode())
            sha.update(data)
        return cls(files, sha.hexdigest())

    @property
    def name(self) -> str:
        return self.files[0][0]

    def stage(self, root: Path | None = None) -> Path:
        """Write the files under ``root`` (default: the temporary directory) unless they
        are there already, and return the trace's path."""
        folder = (root or Path(tempfile.gettempdir())) / STAGING / self.digest[:32]
        for name, data in self.files:
            target = folder / name
            if target.is_file() and target.read_bytes() == data:
                continue
            with atomic_target(target) as tmp:  # workers of one machine may race here
                tmp.write_bytes(data)
        return folder / self.name
