"""The orchestrator's Ray runtime: a cluster joined at `ray_address`, or a local one."""

from __future__ import annotations

import os
import warnings

from sounding.settings.config import Settings


def start_ray(settings: Settings) -> None:
    if not settings.ray_address:
        # A local Ray runtime is one machine's: its node address is loopback, so its daemons and
        # workers listen on loopback only (on Linux Ray otherwise binds every interface). Read
        # when ray is first imported, and by the processes it starts.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if ray.is_initialized():
        return
    if settings.ray_address:
        ray.init(address=settings.ray_address, log_to_driver=False)
    else:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # Ray starts its workers at niceness 15, made for batch tasks; the strategy workers serve
        # a Retrieve's arms and sit on its critical path. With another process busy on this
        # 2-core machine, niceness 15 made Retrieve p50 about 5% slower than 0
        # (bench/README.md). On a cluster, set RAY_worker_niceness=0 on the nodes.
        os.environ.setdefault("RAY_worker_niceness", "0")
        with warnings.catch_warnings():
            # Ray forks and immediately execs its daemons; lancedb's fork warning does not apply.
            warnings.filterwarnings("ignore", message="lancedb fork support")
            # "local": a runtime of its own, never the latest cluster some other process started on
            # this machine (which ray.init without an address joins).
            ray.init(address="local", include_dashboard=False, log_to_driver=False, configure_logging=False)
