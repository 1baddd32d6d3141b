"""A server process's hold on Python's cyclic garbage collector.

By default the collector runs a young collection every 700 net allocations of container objects
and, every hundred of those, a full one that walks every object the process holds. A server
that keeps a large heap alive (the orchestrator: Ray's and LanceDB's modules, the remembered
retrievals, each tenant's learned state) and allocates in bursts (an Observe stream of 10,000
outcomes makes hundreds of thousands of small objects) then spends much of a burst walking the
heap. A larger young generation makes collections rarer without changing what is collected, and
freezing what startup made (`freeze`) keeps it out of every later full collection.
"""

from __future__ import annotations

import gc

YOUNG_GENERATION = 10_000


def configure() -> None:
    """Collect the young generation every `YOUNG_GENERATION` allocations (the older generations'
    thresholds as Python's defaults). Call once, early."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION, middle, old)


def freeze() -> None:
    """Move every object alive now into the permanent generation, never collected nor walked
    again. Call once startup is done: what it made lives as long as the process."""
    gc.collect()
    gc.freeze()
