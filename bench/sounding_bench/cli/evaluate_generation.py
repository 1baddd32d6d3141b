"""`sounding eval generation`: an inquiry state's k generations, with and without shared prefills."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from sounding.cli.common import console
from sounding.settings.config import Settings

from sounding_bench.cli.common import write_result


def eval_generation(
    lengths: str = typer.Option("250,500,1000,2000", help="prompt lengths in tokens, comma-separated"),
    samples: int = typer.Option(8, min=2, max=64, help="concurrent requests per condition (a state's k)"),
    rounds: int = typer.Option(5, min=1, help="rounds per length, the conditions' order alternating"),
    out: Path = typer.Option(Path("bench/results/generation-shared-prefill.json"), help="the JSON result"),
) -> None:
    """Wall time of k concurrent sampled generations of one prompt, and of k prompts repeating
    one text, against k prompts of k different texts of the same length, per length, with the
    bundled generator in process (protocol: `sounding_bench/generation.py`)."""
    from sounding_bench import generation

    try:
        chosen = [int(x) for x in lengths.split(",")]
    except ValueError:
        raise typer.BadParameter("comma-separated token counts", param_hint="--lengths") from None
    if any(n < 1 for n in chosen):
        raise typer.BadParameter("token counts are positive", param_hint="--lengths")
    settings = Settings()
    result = generation.run(generation.GenerationRun(tuple(chosen), samples, rounds), settings, console)
    write_result(result, out, settings)
    ratios = {r["prompt_text_tokens"]: r["median_ratios"] for r in result["lengths"]}
    console.print_json(json.dumps(ratios))
    console.print(f"written to {out}")
