"""What the benchmark commands share beyond the service's own (`sounding.cli.common`): the
SciFact hard-negatives option, and writing a result with its provenance."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from sounding.settings.config import Settings

from sounding_bench.harness import provenance

# `train-nli --scifact` and `eval nli --scifact` (`sounding_bench.scifact_claims.claim_pairs`).
HARD_NEGATIVES = typer.Option(
    0, min=0, max=20, help="with --scifact: nearest uncited abstracts per claim read as neutral"
)


def write_result(
    result: dict, out: Path, settings: Settings, seed: int | None = None, plot: bytes | None = None
) -> None:
    """The result JSON, led by how to reproduce it (`harness.provenance`: command,
    commit, date, seed, settings, model versions), and its diagram as a PNG beside it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"provenance": provenance(settings, seed), **result}, indent=2) + "\n")
    if plot is not None:
        out.with_suffix(".png").write_bytes(plot)
