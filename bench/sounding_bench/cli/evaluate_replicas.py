"""`sounding eval replicas` (`sounding_bench.replicas`: the protocol)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from sounding.cli.common import console

from sounding_bench.cli.common import write_result
from sounding_bench.harness import own_settings, run_settings


def eval_replicas(
    data: Path = typer.Option(..., exists=True, file_okay=False, help="BEIR dataset directory"),
    split: str = typer.Option("test", help="the split whose query texts are retrieved"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
    documents: int = typer.Option(500, min=1, max=100_000, help="the corpus's first documents, ingested"),
    trials: int = typer.Option(30, min=1, max=1000, help="outcomes whose propagation is timed"),
    rounds: int = typer.Option(2, min=1, max=20, help="rounds of each following mode"),
    clients: int = typer.Option(4, min=1, max=64, help="concurrent clients of the timed loads"),
    seconds: float = typer.Option(30.0, min=0.5, max=600.0, help="how long each timed load runs"),
    models_address: str = typer.Option(
        None, help="use the models sidecar at this address instead of starting one"
    ),
) -> None:
    """Several orchestrators on one store: how fast an outcome observed on one reaches another's
    selector, what following the store costs one orchestrator, and Retrieves/s through Envoy in
    front of 1, 2 and 3 orchestrators."""
    from sounding_bench import replicas

    settings = own_settings(run_settings(), "replicas")
    if models_address:
        settings = settings.model_copy(
            update={"models": settings.models.model_copy(update={"address": models_address})}
        )
    spec = replicas.ReplicasRun(
        data,
        split,
        documents=documents,
        trials=trials,
        rounds=rounds,
        clients=clients,
        seconds=seconds,
        own_sidecar=models_address is None,
    )
    result = replicas.run(spec, settings, console)
    write_result(result, out, settings)
    console.print_json(
        json.dumps(
            {
                "propagation_p95_s": result["propagation"]["delay_p95_s"],
                "shared_over_single": result["shared_state_cost"]["shared_over_single"],
                "retrieves_per_s": [t["retrieves_per_s"] for t in result["throughput"]],
            }
        )
    )
    console.print(f"written to {out}")
