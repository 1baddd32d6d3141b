"""Starting and stopping the local stack: the models sidecar, then the orchestrator (which starts
Ray). Used by `sounding up`, the evaluation harness and the integration tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sounding.config import Settings


def wait_serving(address: str, timeout_s: float, process: subprocess.Popen | None = None) -> None:
    """Block until the gRPC health service at `address` reports SERVING."""
    deadline = time.monotonic() + timeout_s
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"process for {address} exited with code {process.returncode}")
            try:
                status = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0).status
                if status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.2)
    raise TimeoutError(f"{address} was not serving after {timeout_s:.0f} s")


class Stack:
    """The sidecar and orchestrator as child processes sharing one environment."""

    def __init__(self, settings: Settings, env: dict[str, str] | None = None, log_dir: Path | None = None):
        self.settings = settings
        self.env = {
            **os.environ,
            **(env or {}),
            "SOUNDING_DATA_DIR": str(settings.data_dir),
            "SOUNDING_ADDRESS": settings.address,
            "SOUNDING_MODELS__ADDRESS": settings.models.address,
        }
        self.log_dir = log_dir
        self.models: subprocess.Popen | None = None
        self.orchestrator: subprocess.Popen | None = None

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        command = [sys.executable, "-m", "sounding.cli", "serve", *args]
        if self.log_dir is None:
            return subprocess.Popen(command, env=self.env, start_new_session=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{name}.log", "ab") as log:
            return subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def start_models(self, timeout_s: float = 180.0) -> None:
        self.models = self._spawn("models", "models")
        wait_serving(self.settings.models.address, timeout_s, self.models)

    def start_orchestrator(self, timeout_s: float = 180.0) -> None:
        self.orchestrator = self._spawn("orchestrator")
        wait_serving(self.settings.address, timeout_s, self.orchestrator)

    def start(self) -> Stack:
        self.start_models()
        self.start_orchestrator()
        return self

    def kill_models(self) -> None:
        _stop(self.models, signal.SIGKILL)
        self.models = None

    def kill_orchestrator(self) -> None:
        """kill -9 the orchestrator's whole process group (its Ray runtime included)."""
        _stop(self.orchestrator, signal.SIGKILL)
        self.orchestrator = None

    def terminate_orchestrator(self) -> subprocess.Popen:
        """SIGTERM to the orchestrator alone, as Kubernetes does: it drains and exits. Returns the
        process (still running) so a caller can watch the drain; `stop` finishes it."""
        process = self.orchestrator
        os.kill(process.pid, signal.SIGTERM)
        return process

    def stop(self) -> None:
        """SIGTERM both (the orchestrator first); each gets its drain grace, and then some, before
        a SIGKILL."""
        patience = self.settings.limits.transport.drain_grace_s + 30.0
        _stop(self.orchestrator, signal.SIGTERM, patience)
        _stop(self.models, signal.SIGTERM, patience)
        self.orchestrator = self.models = None

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _stop(process: subprocess.Popen | None, sig: int, timeout_s: float = 30.0) -> None:
    """SIGKILL goes to the process's whole group at once (what a machine or container dying does);
    another signal goes to the process alone (what Kubernetes does on shutdown), which may drain
    its calls, and once it has exited, or `timeout_s` has passed, the group is killed."""
    if process is None:
        return
    try:
        if process.poll() is None:
            (os.killpg if sig == signal.SIGKILL else os.kill)(process.pid, sig)
            process.wait(timeout=timeout_s)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # what it left behind
    except ProcessLookupError:
        pass
    process.wait()


@contextmanager
def serving(
    settings: Settings, address: str | None = None, env: dict[str, str] | None = None
) -> Iterator[str]:
    """The address of a running orchestrator: `address` if given, otherwise that of a stack
    started here (with `env` added to this environment; logs under the data directory) and
    stopped on exit."""
    if address:
        yield address
        return
    stack = Stack(settings, env=env, log_dir=settings.data_dir / "logs")
    stack.start()
    try:
        yield settings.address
    finally:
        stack.stop()
