"""`sounding eval observe` (`sounding_bench.observe`: the protocol)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from sounding.cli.common import console

from sounding_bench.cli.common import write_result
from sounding_bench.harness import run_settings


def eval_observe(
    data: Path = typer.Option(..., exists=True, file_okay=False, help="BEIR dataset directory"),
    split: str = typer.Option("test", help="the split whose queries are retrieved and observed"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
    retrievals: int = typer.Option(
        10_000, min=1, max=10_000, help="outcomes in the Observe stream (and tool uses in each tool stream)"
    ),
    tool_streams: int = typer.Option(3, min=0, max=20, help="tool-use streams, one after another"),
) -> None:
    """Events per second one Observe stream is acknowledged at: retrieval outcomes, then tool uses."""
    from sounding_bench import observe

    settings = run_settings()
    spec = observe.ObserveRun(data, split, retrievals=retrievals, tool_streams=tool_streams)
    result = observe.run(spec, settings, console)
    write_result(result, out, settings)
    console.print_json(
        json.dumps(
            {
                "retrieval_outcomes_per_s": result["retrieval_outcomes"]["events_per_s"],
                "tool_uses_per_s": [s["events_per_s"] for s in result["tool_uses"]],
            }
        )
    )
    console.print(f"written to {out}")
