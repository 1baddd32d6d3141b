"""`sounding eval throughput` (`sounding_bench.throughput`: the protocol)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from sounding.cli.common import console

from sounding_bench.cli.common import write_result
from sounding_bench.harness import run_settings


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter("comma-separated client counts, e.g. 1,4,16,64") from None
    if not levels or min(levels) < 1 or max(levels) > 256:
        raise typer.BadParameter("each level is 1 to 256 clients")
    return levels


def eval_throughput(
    data: Path = typer.Option(..., exists=True, file_okay=False, help="BEIR dataset directory"),
    split: str = typer.Option("test", help="the split whose query texts are sent"),
    out: Path = typer.Option(..., help="where to write the JSON result (its plot beside it)"),
    levels: str = typer.Option("1,4,16,64", help="concurrent clients of each level"),
    seconds: float = typer.Option(20.0, min=0.5, max=600.0, help="how long each system runs per level"),
    address: str = typer.Option(None, help="measure the stack at this address; default starts one"),
    cold_start_queries: int = typer.Option(
        300,
        min=0,
        max=10_000,
        help="Retrieves naming no arms in the selector's cold-start phase (0: skip it)",
    ),
) -> None:
    """Closed-loop throughput and p50/p99 latency against concurrency: the service as a client
    calls it by default and with the expansion loop off, LanceDB hybrid and bm25s + MiniLM in
    process, and the limit the encoder and the store set on this machine; then the selector's
    cold start (Retrieves naming no arms against dense + lexical)."""
    from sounding_bench import throughput

    settings = run_settings(address)
    spec = throughput.ThroughputRun(
        data,
        split,
        levels=tuple(_levels(levels)),
        seconds=seconds,
        address=address,
        cold_start_queries=cold_start_queries,
    )
    result = throughput.run(spec, settings, console)
    write_result(result, out, settings, plot=throughput.plot(result))
    console.print_json(json.dumps({"ratios": result["ratios"], "limit_qps": result["limit"]["qps"]}))
    console.print(f"written to {out} and {out.with_suffix('.png')}")
