"""Running Sounding's processes: `serve` (the orchestrator), `serve models` (the sidecar), `up`
(all of them, supervised) and `health` (a probe)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import typer

from sounding.cli.common import TLS_CA, TLS_CERT, TLS_KEY, console, run_until_signalled, start_stack
from sounding.settings import extras
from sounding.settings.config import Settings

serve_app = typer.Typer(help="Run a Sounding process.")


@serve_app.callback(invoke_without_command=True)
def serve(ctx: typer.Context) -> None:
    """The orchestrator: public gRPC API, Ray strategy workers, the LanceDB store."""
    if ctx.invoked_subcommand is not None:
        return
    extras.require(extras.ORCHESTRATOR)
    from sounding.assembly.orchestrator import serve as serve_orchestrator

    try:
        run_until_signalled(lambda: serve_orchestrator(Settings()))
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()


@serve_app.command("models")
def serve_models() -> None:
    """The models sidecar: embeddings (micro-batched), NLI and generation."""
    extras.require(extras.MODELS_SIDECAR)
    # OpenMP threads that spin while waiting steal the cores the other processes (Ray workers,
    # orchestrator) need, and then wait for them: measured here with two busy cores, SmolLM2
    # decoded 2.9 tokens/s (batch of 8) with spinning threads and 32 tokens/s with passive ones.
    # Set before torch loads; an explicit setting in the environment wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from sounding.assembly.sidecar import serve as serve_sidecar

    run_until_signalled(lambda: serve_sidecar(Settings()))


def health(
    address: str = typer.Option(None, help="host:port (default: SOUNDING_ADDRESS)"),
    service: str = typer.Option("", help="a service's name; empty: the server as a whole"),
    tls_ca: Path = TLS_CA,
    tls_cert: Path = TLS_CERT,
    tls_key: Path = TLS_KEY,
    timeout: float = typer.Option(3.0, min=0.01, help="seconds to wait for the answer"),
) -> None:
    """Check a server's gRPC health (over TLS with --tls-ca): exit 0 when SERVING, 1 otherwise.
    For probes that cannot speak TLS themselves (deploy/: Kubernetes' gRPC probes cannot)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from sounding_client.credentials import channel_credentials

    address = address or Settings().address
    credentials = channel_credentials(None, tls_ca, tls_cert, tls_key)
    channel = grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)
    with channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout
            )
        except grpc.RpcError as error:
            console.print(f"{address}: {error.code().name} {error.details()}", highlight=False)
            raise typer.Exit(1) from None
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    console.print(f"{address}: {status}", highlight=False)
    if answer.status != health_pb2.HealthCheckResponse.SERVING:
        raise typer.Exit(1)


def up(
    data_dir: Path = typer.Option(None, help="LanceDB directory and caches (default ./.sounding)"),
) -> None:
    """Start the sidecar, Ray and the orchestrator, and start again any of them that exits;
    Ctrl-C stops them cleanly (the orchestrator drains first). The processes' own output goes
    to <data dir>/logs/."""
    from sounding.stack import Stack

    settings = Settings() if data_dir is None else Settings(data_dir=data_dir)
    stack = Stack(settings, log_dir=settings.data_dir / "logs")
    try:
        start_stack(stack)
        stack.supervise()
        console.print(f"logs in {stack.log_dir}; Ctrl-C stops everything.", highlight=False)
        # Also when started in the background, where the shell leaves SIGINT ignored.
        for stop_signal in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop_signal, signal.default_int_handler)
        seen = 0
        while True:
            time.sleep(0.5)
            for _, name in stack.restarts[seen:]:
                console.print(f"[yellow]{name} exited; started again[/yellow]")
            seen = len(stack.restarts)
    except KeyboardInterrupt:
        console.print("stopping… (the orchestrator finishes its calls first)")
    finally:
        # A second Ctrl-C must not leave the processes behind, holding the ports: the stop is
        # bounded (the drain's grace, then SIGKILL) and runs to its end.
        for stop_signal in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop_signal, signal.SIG_IGN)
        stack.stop()
