"""The C allocator's threshold for large blocks, fixed so that the service's RSS stays flat.

glibc serves a block of at least ``M_MMAP_THRESHOLD`` bytes with its own ``mmap``, given
back to the system when freed. By default the threshold moves: each time such a block is
freed the threshold rises to its size (up to 32 MiB). A dispatch's large buffers (the
request body, the parsed snapshot's arrays, the solver's model) then land in the heaps of
the worker threads' arenas, which glibc returns to the system only from their top. From
call to call the free gaps between live blocks grow: on the soak's steady workload the
heap in use stayed at ~45 MB while the free space held in the heaps grew 10 → 23 MB over
4,000 calls and RSS with it. With the threshold fixed at 128 KiB (glibc's starting value;
fixing it also stops the moving), large blocks are mapped and unmapped again, and the free
space held stayed at 7-8 MB from the 1,200th call on (docs/results/service.md, soak).

Only glibc has ``mallopt``'s ``M_MMAP_THRESHOLD``; elsewhere nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number for the threshold (glibc's ``malloc.h``)."""


def fix_mmap_threshold(kib: int) -> bool:
    """Fix glibc's threshold for mapping large blocks at ``kib`` KiB (0: leave glibc's
    moving default). Returns whether the allocator took it."""
    if kib <= 0:
        return False
    libc_version = platform.libc_ver()[0]
    if libc_version != "glibc":
        log.info("malloc_threshold_unchanged", extra={"reason": "not glibc", "libc": libc_version})
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    taken = bool(libc.mallopt(M_MMAP_THRESHOLD, kib * 1024))
    if not taken:
        log.warning("malloc_threshold_refused", extra={"kib": kib})
    return taken
