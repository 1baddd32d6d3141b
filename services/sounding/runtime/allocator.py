"""A process's hold on glibc's allocator, so its resident memory follows its work.

Work that allocates many sizes across threads (the sidecar's forward passes on the gRPC, encode,
generate and torch threads; LanceDB's commits on its runtime's threads) gets an arena per busy
thread from glibc, which keeps freed memory inside each arena; the freed pieces fragment and the
resident set ratchets upward. glibc also raises its threshold for serving a request from its own
mapping each time such a mapping is freed, so ever larger temporary buffers land among the small
objects of the heap, and the heap cannot shrink past the ones still live. Two arenas, a fixed
mapping threshold, and a trim after each large piece of work keep the resident set near what the
work in flight needs. Elsewhere than glibc all three are no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

# mallopt's parameter numbers, <malloc.h>
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
ARENAS = 2
# glibc's own starting value; setting it turns its upward adjustment off.
MMAP_THRESHOLD_BYTES = 128 << 10


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def configure() -> None:
    """Bound the arenas and fix the mapping threshold. Call early, before the threads that
    allocate start: arenas made before it are not bounded."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_ARENA_MAX, ARENAS)
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def release_free_memory() -> None:
    """Give the allocator's free pages back to the operating system (a few milliseconds)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
