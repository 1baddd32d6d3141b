"""`sounding eval nli`: the NLI model on labelled pairs, a file's or SciFact's."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import typer
from sounding.cli.common import console
from sounding.settings.config import Settings

from sounding_bench.cli.common import HARD_NEGATIVES, write_result


def eval_nli(
    data: Path = typer.Option(None, exists=True, dir_okay=False, help="SNLI-style CSV or JSONL"),
    scifact: Path = typer.Option(
        None,
        exists=True,
        file_okay=False,
        help="instead of --data: SciFact's claims (BEIR directory) against their cited abstracts' sentences",
    ),
    split: str = typer.Option("train", help="with --scifact: the split whose claims are read"),
    held_out_only: bool = typer.Option(
        True, help="with --scifact --split train: only the held-out fifth of the claims (never trained on)"
    ),
    hard_negatives: int = HARD_NEGATIVES,
    model: Path = typer.Option(None, help="a sequence-classification NLI model; default: the trained one"),
    out: Path = typer.Option(None, help="also write the JSON result here"),
) -> None:
    """Accuracy and per-class F1 of the NLI model on labelled pairs: a file's, or SciFact's
    (a rationale sentence entails or contradicts its claim by the claim's verdict; two other
    sentences of each cited abstract are neutral, and with `--hard-negatives N` the title and
    two sentences of each of the claim's N nearest uncited abstracts too)."""
    from sounding.models import nli

    settings = Settings()
    path = model or settings.models.cache_dir / nli.TRAINED_DIR
    if not path.exists():
        console.print(f"[red]no NLI model at {path}[/red]; run `sounding models train-nli` first")
        raise typer.Exit(1)
    if (data is None) == (scifact is None):
        raise typer.BadParameter("give either --data or --scifact", param_hint="--data")
    if scifact is not None:
        from sounding_bench import scifact_claims

        claims = scifact_claims.load_claims(scifact, split)
        if split == "train" and held_out_only:
            claims = [c for c in claims if scifact_claims.held_out(c.id)]
        pairs = scifact_claims.claim_pairs(scifact, claims, hard_negatives)
        source: dict = {
            "scifact": str(scifact),
            "split": split,
            "held_out_only": held_out_only,
            "hard_negatives": hard_negatives,
            "claims": len(claims),
            "pairs_by_label": dict(Counter(p.label for p in pairs)),
        }
        skipped: dict[str, int] = {}
    else:
        read = nli.read_pairs(data)
        pairs, skipped, source = read.pairs, read.skipped, {"data": str(data)}
        if skipped:
            console.print(f"left out {sum(skipped.values())} rows: {skipped}")
    with console.status(f"classifying {len(pairs)} pairs"):
        result = {
            **source,
            "model": str(path),
            "skipped_rows": skipped,
            **nli.evaluate(nli.NliModel(path), pairs),
        }
    console.print_json(json.dumps(result))
    if out:
        write_result(result, out, settings)
