"""Crashes for the load suite (`sounding_bench.load`): a process of a stack killed with SIGKILL, and
when the stack served again.

The stack serves again after a kill once the killed process has a successor (a new worker
process, a new sidecar answering SERVING, a new orchestrator), a Retrieve has succeeded, and the
orchestrator's health has come back: SERVING again after it reported the loss, or, if it never
did, SERVING at every check for longer than its readiness probes take to notice a peer that does
not answer (`settle_s`). Only events count, not how fast they come.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sounding_bench.fuzz import stack_processes
from sounding_bench.health import HealthWatch


@dataclass(frozen=True)
class Kill:
    at_s: float
    what: str  # "sidecar", "worker" or "orchestrator"


def kill(stack, what: str) -> int:
    """SIGKILL, as a crash: the sidecar, one strategy worker, or the orchestrator's whole group."""
    if what == "sidecar":
        pid = stack.models.pid
        os.kill(pid, signal.SIGKILL)
    elif what == "worker":
        pid = next(p for n, p in stack_processes(stack).items() if n.startswith("worker"))
        os.kill(pid, signal.SIGKILL)
    else:
        pid = stack.orchestrator.pid
        os.killpg(pid, signal.SIGKILL)
    return pid


def successor(stack, what: str, killed: int, before: set[int]) -> bool:
    """Whether the process killed (pid `killed`; the stack's pids before the kill: `before`) has
    a successor: a strategy worker process that was not there before, a new sidecar answering
    SERVING, a new orchestrator process."""
    import psutil

    try:
        if what == "worker":
            return any(
                name.startswith("worker") and pid not in before
                for name, pid in stack_processes(stack).items()
            )
        process = stack.models if what == "sidecar" else stack.orchestrator
        if process is None or process.pid == killed or process.poll() is not None:
            return False
        return what != "sidecar" or _serving(stack.settings.models.address, stack.settings.models.tls)
    except (RuntimeError, psutil.Error):  # the stack is between processes
        return False


def _serving(address: str, tls) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from sounding.stack import self_check

    credentials, options = self_check(tls)
    channel = (
        grpc.insecure_channel(address, options)
        if credentials is None
        else grpc.secure_channel(address, credentials, options)
    )
    with channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        except grpc.RpcError:
            return False
    return response.status == health_pb2.HealthCheckResponse.SERVING


def serving_again(
    checks: Sequence[tuple[float, str, float]], what: str, since: float, ready_at: float, settle_s: float
) -> float | None:
    """When the stack served again after `what` was killed at `since`, from the orchestrator's
    health `checks` ((time, outcome, latency), in order), given that the successor ran and a
    Retrieve succeeded at `ready_at`; None while that is not known.

    Health that reported the loss (NOT_SERVING for a sidecar or worker, which the orchestrator
    reports once its probes missed twice; any failure for the orchestrator, which is gone) and
    answers SERVING again has seen every probe answer: served again at the first SERVING after the
    last such report (or at `ready_at`, if later). Health that never reported it must say SERVING
    at every check for `settle_s` from `ready_at` (or from its last failed check, if later): then
    served again at that start."""
    after = [(t, outcome) for t, outcome, _ in checks if t > since]
    if not after or after[-1][1] != "OK":
        return None
    lost = [
        i
        for i, (_, outcome) in enumerate(after)
        if (outcome != "OK" if what == "orchestrator" else outcome == "NOT_SERVING")
    ]
    if lost:
        return max(_first_ok_after(after, lost[-1]), ready_at)
    failed = [i for i, (t, outcome) in enumerate(after) if outcome != "OK" and t >= ready_at]
    serving_since = max(_first_ok_after(after, failed[-1]), ready_at) if failed else ready_at
    return serving_since if after[-1][0] - serving_since >= settle_s else None


def _first_ok_after(checks: list[tuple[float, str]], index: int) -> float:
    return next(t for t, outcome in checks[index + 1 :] if outcome == "OK")


def recovered(
    stack,
    what: str,
    killed: int,
    before: set[int],
    client,
    collection: str,
    query: str,
    health: HealthWatch,
    since: float,
    settle_s: float,
    patience_s: float = 600.0,
) -> float | None:
    """When the stack served again after `what` (pid `killed`) was killed at `since` (see
    `serving_again`); checked every half second once the killed process has a successor and a
    Retrieve of `query` on `collection` succeeded. None if not within `patience_s`."""
    ready_at = None
    while time.time() - since < patience_s:
        if ready_at is None:
            if successor(stack, what, killed, before):
                try:
                    client.retrieve_final(collection, query, top_k=3, arms=["dense"], timeout=60)
                    ready_at = time.time()
                except Exception:
                    pass
        else:
            back = serving_again(list(health.checks), what, since, ready_at, settle_s)
            if back is not None:
                return back
        time.sleep(0.5)
    return None
