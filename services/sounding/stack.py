"""Starting and stopping the local stack: the models sidecar, then the orchestrator (which starts
Ray). Used by `sounding up`, the evaluation harness and the integration tests."""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import certifi
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sounding.serving import rpc
from sounding.settings import extras
from sounding.settings.config import Settings, TlsSettings

log = logging.getLogger(__name__)


class StackError(RuntimeError):
    """A process of the stack did not start; the message names the cause and the fix."""


class NotOurs(RuntimeError):
    """Another server answers at the address a process was started to serve on."""


def wait_serving(
    address: str,
    timeout_s: float,
    process: subprocess.Popen | None = None,
    credentials: grpc.ChannelCredentials | None = None,
    service: str = "",
    options: tuple[tuple[str, str], ...] = (),
) -> None:
    """Block until the gRPC health service at `address` reports `service` SERVING. RuntimeError
    at once if `process` exits; `NotOurs` if the server there does not know `service` (another
    server holds the port); TimeoutError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    channel = (
        grpc.insecure_channel(address, options)
        if credentials is None
        else grpc.secure_channel(address, credentials, options)
    )
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"process for {address} exited with code {process.returncode}")
            try:
                status = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=1.0).status
                if status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError as error:
                if service and error.code() == grpc.StatusCode.NOT_FOUND:  # pyright: ignore[reportAttributeAccessIssue]
                    raise NotOurs(f"another server answers at {address}") from None
            time.sleep(0.2)
    raise TimeoutError(f"{address} was not serving after {timeout_s:.0f} s")


def self_check(tls: TlsSettings) -> tuple[grpc.ChannelCredentials | None, tuple[tuple[str, str], ...]]:
    """The credentials and channel options with which a stack checks its own server under these
    TLS settings: plaintext when the port is; else TLS verified against `ca_file` when given,
    otherwise against the server's own certificate file (a self-signed one, or a chain ending in
    its CA) and the public roots (certifi's), for a name the certificate holds; with the client
    certificate a mutual-TLS port asks for."""
    if tls.cert_file is None:
        return None, ()
    if tls.client_ca_file is not None and tls.client_cert_file is None:
        raise StackError(
            "the port requires client certificates (client_ca_file), so the stack's own readiness "
            "check needs one: set client_cert_file, client_key_file and ca_file in the same TLS settings"
        )
    certificate = tls.cert_file.read_bytes()
    public = Path(certifi.where()).read_bytes()
    roots = tls.ca_file.read_bytes() if tls.ca_file is not None else certificate + b"\n" + public
    key, chain = (
        (tls.client_key_file.read_bytes(), tls.client_cert_file.read_bytes())
        if tls.client_cert_file is not None and tls.client_key_file is not None
        else (None, None)
    )
    credentials = grpc.ssl_channel_credentials(roots, key, chain)
    return credentials, (("grpc.ssl_target_name_override", certificate_name(certificate)),)


def certificate_name(pem: bytes) -> str:
    """A name the (first) certificate in `pem` is valid for: its first DNS or IP subject
    alternative name, else its common name."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    certificate = x509.load_pem_x509_certificate(pem)
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        for kind in (x509.DNSName, x509.IPAddress):
            found = names.get_values_for_type(kind)
            if found:
                return str(found[0])
    except x509.ExtensionNotFound:
        pass
    common = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(common[0].value) if common else ""


def refuse_taken(address: str, variable: str) -> None:
    """StackError naming the port and the fix when something already listens on `address`."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    try:
        family = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0][0]
    except (OSError, ValueError):
        return  # not resolvable here: the process's own bind reports it
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as grpc binds: TIME_WAIT is no owner
        try:
            probe.bind((host, int(port)))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise StackError(_taken(address, variable)) from None


def _taken(address: str, variable: str) -> str:
    port = address.rpartition(":")[2]
    return (
        f"port {port} ({address}) is in use: is another Sounding stack running (`sounding up`, "
        f"`sounding demo`)? Stop it, or set {variable} to a free address"
    )


# How long a started process may take to serve: a bound on a hang only (a process that exits
# fails the wait at once), so generous enough for a slow or busy machine.
START_TIMEOUT_S = 600.0


class Stack:
    """The sidecar and orchestrator as child processes sharing one environment. Each is started
    on a port nothing else holds and is known to be up only when its own health answers for the
    instance id it was given (`wait_serving`): a stranger on the port ends the start with a
    `StackError`, never a stack that talks to someone else's processes. With `supervise()`, a
    process that exits unasked is started again (as Kubernetes restarts a container), until
    `stop()`; `restarts` lists (time, name) of each restart."""

    def __init__(self, settings: Settings, env: dict[str, str] | None = None, log_dir: Path | None = None):
        self.settings = settings
        self.instance_id = uuid.uuid4().hex
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
            "SOUNDING_INSTANCE_ID": self.instance_id,
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

    def _start(self, name: str, address: str, tls: TlsSettings, variable: str, timeout_s: float) -> None:
        """Start `name` ("models" or "orchestrator") and wait until it serves, or end with a
        StackError (the process stopped) naming why."""
        refuse_taken(address, variable)
        credentials, options = self_check(tls)
        process = self._spawn(name, *(["models"] if name == "models" else []))
        setattr(self, name, process)
        what = "models sidecar" if name == "models" else "orchestrator"
        service = rpc.instance_health_name(self.instance_id)
        try:
            wait_serving(address, timeout_s, process, credentials, service, options)
        except NotOurs:
            _stop(process, signal.SIGKILL)
            raise StackError(_taken(address, variable)) from None
        except RuntimeError:
            raise StackError(
                f"the {what} exited with code {process.returncode} while starting{self._last_line(name)}"
            ) from None
        except TimeoutError:
            _stop(process, signal.SIGKILL)
            raise StackError(
                f"the {what} was not serving on {address} after {timeout_s:.0f} s{self._last_line(name)}"
            ) from None

    def _last_line(self, name: str) -> str:
        """': <the last line of the process's log> (log: <path>)', or '' without a log."""
        if self.log_dir is None:
            return ""
        path = self.log_dir / f"{name}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        last = next((line.strip() for line in reversed(lines) if line.strip()), "")
        return f": {last[:300]} (log: {path})" if last else f" (log: {path})"

    def start_models(self, timeout_s: float = START_TIMEOUT_S) -> None:
        extras.require(extras.MODELS_SIDECAR)
        models = self.settings.models
        self._start("models", models.address, models.tls, "SOUNDING_MODELS__ADDRESS", timeout_s)

    def start_orchestrator(self, timeout_s: float = START_TIMEOUT_S) -> None:
        extras.require(extras.ORCHESTRATOR)
        self._start("orchestrator", self.settings.address, self.settings.tls, "SOUNDING_ADDRESS", timeout_s)

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
