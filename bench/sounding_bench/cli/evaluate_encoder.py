"""`sounding eval encoder` (`sounding_bench.encoder`: the protocol)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from sounding.cli.common import console
from sounding.settings.config import Settings

from sounding_bench.cli.common import write_result


def eval_encoder(
    data: Path = typer.Option(..., exists=True, file_okay=False, help="BEIR dataset directory"),
    split: str = typer.Option("test", help="the split whose queries are ranked"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
    documents: int = typer.Option(0, min=0, help="documents of the corpus to encode (0: all)"),
) -> None:
    """The CPU encoders (torch fp32, ONNX Runtime fp32 and int8) on one corpus: nDCG@10, and the
    documents, query batches and single queries each encodes per second, alternating."""
    from sounding_bench import encoder

    settings = Settings()
    spec = encoder.EncoderRun(data, split, settings.cache_dir / "eval" / "encoder", documents)
    result = encoder.run(spec, settings.models, console)
    write_result(result, out, settings)
    console.print_json(json.dumps(result["verdict"]))
    console.print(f"written to {out}")
