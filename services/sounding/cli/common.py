"""What the commands share: the console, how to reach a running orchestrator, documents from
files, and starting a stack."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import typer
from rich.console import Console

from sounding.settings.config import Settings

console = Console()

# How the commands that call a running orchestrator reach it.
ADDRESS = typer.Option(None, help="orchestrator address, host:port (default: SOUNDING_ADDRESS)")
TOKEN = typer.Option(None, "--token", envvar="SOUNDING_TOKEN", help="bearer token (or SOUNDING_TOKEN)")
TLS_CA = typer.Option(
    None, "--tls-ca", exists=True, dir_okay=False, help="CA bundle verifying the server: turns TLS on"
)
TLS_CERT = typer.Option(
    None, "--tls-cert", exists=True, dir_okay=False, help="client certificate (mutual TLS)"
)
TLS_KEY = typer.Option(None, "--tls-key", exists=True, dir_okay=False, help="client certificate's key")


def connect(address: str | None, token: str | None, tls_ca: Path | None, tls_cert: Path | None, tls_key):
    from sounding_client import Client

    return Client(
        address or Settings().address, token=token, ca_file=tls_ca, cert_file=tls_cert, key_file=tls_key
    )


def read_documents(path: Path):
    """Documents from a .jsonl file (BEIR corpus or {id,text,title,metadata} lines) or from the
    .txt/.md files under a directory (id = relative path)."""
    if path.is_file():
        with path.open() as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)
        return
    for file in sorted(p for p in path.rglob("*") if p.suffix in {".txt", ".md"} and p.is_file()):
        yield {"id": str(file.relative_to(path)), "title": file.stem, "text": file.read_text()}


def run_until_signalled(main) -> None:
    """Run `main()` (a coroutine function) until it ends or SIGINT/SIGTERM arrives."""
    from sounding.runtime import telemetry

    async def runner() -> None:
        task = asyncio.ensure_future(main())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            pass

    settings = Settings()
    telemetry.configure_logging(settings.log_level, settings.log_format)
    asyncio.run(runner())


def start_stack(stack) -> None:
    """Start the sidecar, then Ray and the orchestrator, saying where each serves."""
    settings = stack.settings
    with console.status("starting the models sidecar"):
        stack.start_models()
    console.print(f"models sidecar serving on {settings.models.address}")
    with console.status("starting Ray and the orchestrator"):
        stack.start_orchestrator()
    console.print(f"orchestrator serving on {settings.address} (data in {settings.data_dir})")
