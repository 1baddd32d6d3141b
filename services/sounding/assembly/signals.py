"""How a serving process learns that it should stop."""

from __future__ import annotations

import asyncio
import signal


def stop_on_signals(serving: asyncio.Event) -> asyncio.Event:
    """An event set by SIGTERM or SIGINT. Before `serving` is set (while starting up), or on a
    second signal (cutting a drain short), the running task is cancelled instead. Installed after
    Ray starts: Ray's driver replaces the Python handlers, and its C++ failure-signal handler
    arms a 3-second abort on SIGTERM (ray-project/ray#64830), which the handler here disarms so
    that a drain can take its grace period."""
    stop = asyncio.Event()
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    if task is None:
        raise RuntimeError("stop_on_signals runs inside the serving task")

    def on_signal() -> None:
        signal.alarm(0)
        if stop.is_set() or not serving.is_set():
            task.cancel()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    return stop
