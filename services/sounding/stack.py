"""Starting and stopping the local stack: the models sidecar, then the orchestrator (which starts
Ray). Used by `sounding up`, the evaluation harness and the integration tests."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sounding.serving.rpc import channel_credentials
from sounding.settings import extras
from sounding.settings.config import Settings

log = logging.getLogger(__name__)


def wait_serving(
    address: str,
    timeout_s: float,
    process: subprocess.Popen | None = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> None:
    """Block until the gRPC health service at `address` reports SERVING."""
    deadline = time.monotonic() + timeout_s
    channel = (
        grpc.insecure_channel(address) if credentials is None else grpc.secure_channel(address, credentials)
    )
    with channel:
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


# How long a started process may take to serve: a bound on a hang only (a process that exits
# fails the wait at once), so generous enough for a slow or busy machine.
START_TIMEOUT_S = 600.0


class Stack:
    """The sidecar and orchestrator as child processes sharing one environment. With
    `supervise()`, a process that exits unasked is started again (as Kubernetes restarts a
    container), until `stop()`; `restarts` lists (time, name) of each restart."""

    def __init__(self, settings: Settings, env: dict[str, str] | None = None, log_dir: Path | None = None):
        self.settings = settings
        self.restarts: list[tuple[float, str]] = []
        self._stopping = threading.Event()
        self._restarting = threading.Lock()
        self._supervisor: threading.Thread | None = None
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

    def start_models(self, timeout_s: float = START_TIMEOUT_S) -> None:
        extras.require(extras.MODELS_SIDECAR)
        self.models = self._spawn("models", "models")
        credentials = channel_credentials(self.settings.models.tls)
        wait_serving(self.settings.models.address, timeout_s, self.models, credentials)

    def start_orchestrator(self, timeout_s: float = START_TIMEOUT_S) -> None:
        extras.require(extras.ORCHESTRATOR)
        self.orchestrator = self._spawn("orchestrator")
        wait_serving(
            self.settings.address, timeout_s, self.orchestrator, channel_credentials(self.settings.tls)
        )

    def start(self) -> Stack:
        self.start_models()
        self.start_orchestrator()
        return self

    def kill_models(self) -> None:
        """kill -9 the sidecar, to start it again by hand (a supervisor leaves it down)."""
        with self._restarting:
            _stop(self.models, signal.SIGKILL)
            self.models = None

    def kill_orchestrator(self) -> None:
        """kill -9 the orchestrator's whole process group (its Ray runtime included), to start
        it again by hand (a supervisor leaves it down)."""
        with self._restarting:
            _stop(self.orchestrator, signal.SIGKILL)
            self.orchestrator = None

    def terminate_orchestrator(self) -> subprocess.Popen:
        """SIGTERM to the orchestrator alone, as Kubernetes does: it drains and exits (and a
        supervisor starts it again). Returns the process (still running) so a caller can watch
        the drain; `stop` finishes it."""
        process = self.orchestrator
        if process is None:
            raise RuntimeError("the orchestrator is not running")
        os.kill(process.pid, signal.SIGTERM)
        return process

    def supervise(self, interval_s: float = 0.5) -> None:
        def watch() -> None:
            while not self._stopping.wait(interval_s):
                with self._restarting:
                    for name in ("models", "orchestrator"):
                        process = getattr(self, name)
                        if self._stopping.is_set() or process is None or process.poll() is None:
                            continue
                        log.warning("%s exited with code %s; starting it again", name, process.returncode)
                        _stop(process, signal.SIGKILL)  # whatever it left behind
                        self.restarts.append((time.time(), name))
                        try:
                            getattr(self, f"start_{name}")()
                        except (RuntimeError, TimeoutError) as error:
                            log.error("restarting %s failed: %s", name, error)

        self._supervisor = threading.Thread(target=watch, name="stack-supervisor", daemon=True)
        self._supervisor.start()

    def stop(self) -> None:
        """SIGTERM both (the orchestrator first); each gets its drain grace, and then some, before
        a SIGKILL."""
        self._stopping.set()
        if self._supervisor is not None:
            with self._restarting:  # a restart under way finishes first
                pass
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
    try:  # an interrupt while starting stops what had started
        stack.start()
        yield settings.address
    finally:
        stack.stop()
