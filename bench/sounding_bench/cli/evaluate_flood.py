"""`sounding eval flood`: what callers without a token can take from those with one."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from sounding.cli.common import console, read_documents

from sounding_bench.cli.common import write_result
from sounding_bench.harness import DEMO_CORPUS, DENSE_AND_LEXICAL_ARMS, run_settings


def eval_flood(
    out: Path = typer.Option(..., help="where to write the JSON result"),
    streams: int = typer.Option(
        512, min=1, help="Health.Watch streams, and as many reflection ones, per port"
    ),
    retrieves: int = typer.Option(200, min=1, help="Retrieves with a token while they are held"),
    bodies: int = typer.Option(
        20, min=1, help="large Retrieve requests sent at once, without and with a token"
    ),
    body_mib: float = typer.Option(15.0, min=0.1, max=15.9, help="each large request's size"),
) -> None:
    """Unauthenticated streams held open on both ports while Retrieves with a token run, and large
    request bodies without a token, on a stack of its own with tokens on both ports
    (`sounding_bench.flood`; exit status 1 unless every Retrieve with a token succeeded and both
    servers stayed SERVING)."""
    import shutil

    from sounding.serving import auth
    from sounding.settings.config import AuthSettings
    from sounding.stack import Stack

    from sounding_bench import flood

    settings = run_settings()
    data_dir = settings.cache_dir / "eval" / "flood"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    public_token, digest = auth.new_token()
    sidecar_token = auth.new_token()[0]
    (data_dir / "tokens.toml").write_text(
        f'[[tokens]]\nsha256 = "{digest}"\ntenant = "flood"\nrole = "admin"\n'
    )
    (data_dir / "sidecar.token").write_text(sidecar_token)
    settings = settings.model_copy(
        update={
            "data_dir": data_dir,
            "auth": AuthSettings(tokens_file=data_dir / "tokens.toml"),
            "models": settings.models.model_copy(update={"token_file": data_dir / "sidecar.token"}),
        }
    )
    env = {
        **DENSE_AND_LEXICAL_ARMS,
        "SOUNDING_AUTH__TOKENS_FILE": str(data_dir / "tokens.toml"),
        "SOUNDING_MODELS__TOKEN_FILE": str(data_dir / "sidecar.token"),
    }
    target = flood.Target(settings.address, settings.models.address, public_token, sidecar_token, "docs")
    with Stack(settings, env=env, log_dir=data_dir / "logs") as stack:
        from sounding_client import Client

        with Client(settings.address, token=public_token, timeout=1800) as client:
            client.create_collection(target.collection)
            list(client.ingest(target.collection, list(read_documents(DEMO_CORPUS))))
        with console.status(
            f"{2 * streams} streams without a token held on each port; {retrieves} Retrieves"
        ):
            held = flood.held_streams(target, streams, retrieves)
        with console.status(f"{bodies} requests of {body_mib:g} MiB, without and with a token"):
            assert stack.orchestrator is not None
            large = flood.large_bodies(target, stack.orchestrator.pid, bodies, body_mib)
    per_peer = settings.limits.transport.max_unauthenticated_calls_per_peer
    result = {
        "passes": flood.verdict(held, per_peer),
        "unauthenticated_calls_per_peer": per_peer,
        "unauthenticated_calls": settings.limits.transport.max_unauthenticated_calls,
        "held_streams": held,
        "large_bodies": large,
    }
    write_result(result, out, settings)
    console.print_json(json.dumps(result))
    if not result["passes"]:
        raise typer.Exit(1)
