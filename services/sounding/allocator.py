"""A process's hold on glibc's allocator, so its resident memory follows its work.

Work that allocates many sizes across threads (the sidecar's forward passes on the gRPC, encode,
generate and torch threads; LanceDB's commits on its runtime's threads) gets an arena per busy
thread from glibc, which keeps freed memory inside each arena; the freed pieces fragment and the
resident set ratchets upward. Two arenas, and a trim after each large piece of work, keep it near
what the work in flight needs. Elsewhere than glibc both are no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

_M_ARENA_MAX = -8  # mallopt's parameter number, <malloc.h>
ARENAS = 2


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def limit_arenas(arenas: int = ARENAS) -> None:
    """Call early, before the threads that allocate start: later arenas are bounded by it."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_ARENA_MAX, arenas)


def release_free_memory() -> None:
    """Give the allocator's free pages back to the operating system (a few milliseconds)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
