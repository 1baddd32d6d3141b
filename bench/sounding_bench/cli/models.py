"""`sounding models`: training and preparing the sidecar's models."""

from __future__ import annotations

from pathlib import Path

import typer
from sounding.cli.common import console
from sounding.models.nli import BUNDLED_TRAINING_DATA
from sounding.runtime.progress import StepProgress
from sounding.settings import extras
from sounding.settings.config import Settings

from sounding_bench.cli.common import HARD_NEGATIVES

models_app = typer.Typer(help="Train or prepare the sidecar's models.")


@models_app.command("train-nli")
def train_nli(
    data: Path = typer.Option(
        BUNDLED_TRAINING_DATA, exists=True, dir_okay=False, help="SNLI-style CSV or JSONL (optionally .gz)"
    ),
    epochs: int = typer.Option(3, min=1, max=20, help="passes over the data"),
    steps: int = typer.Option(0, min=0, help="optimisation steps instead (0: those of --epochs)"),
    batch_size: int = typer.Option(32, min=1, max=512, help="pairs per optimisation step"),
    learning_rate: float = typer.Option(5e-5, min=1e-7, max=1e-2, help="AdamW's peak learning rate"),
    scifact: Path = typer.Option(
        None,
        exists=True,
        file_okay=False,
        help="also train on SciFact's train claims (BEIR directory): their rationale sentences and, "
        "as neutral, other sentences of the cited abstracts (and of the nearest uncited ones: "
        "--hard-negatives); the held-out fifth of the claims is left out",
    ),
    hard_negatives: int = HARD_NEGATIVES,
    balanced: bool = typer.Option(False, help="weigh the loss per class, balanced over the pairs"),
    name: str = typer.Option(
        "", help="save under this name in the models cache (default: the sidecar's own model's name)"
    ),
) -> None:
    """Fine-tune the NLI cross-encoder (MiniLM encoder, 3-way head) for a fixed number of steps
    (the same weights for the same data, steps and seed, however busy the machine) and save it in
    the models cache, where the sidecar loads it from (a model saved under another `--name` is
    loaded by setting SOUNDING_MODELS__NLI__MODEL to its directory). Interrupted, it resumes from
    its last checkpoint when run again with the same options."""
    extras.require(extras.MODELS_SIDECAR)
    from sounding.models import nli

    settings = Settings()
    read = nli.read_pairs(data)
    if read.two_way:
        raise typer.BadParameter(
            "a two-way set (entailment / not_entailment) cannot train the 3-way head", param_hint="--data"
        )
    if read.skipped:
        console.print(f"left out {sum(read.skipped.values())} rows: {read.skipped}")
    pairs = read.pairs
    if scifact is not None:
        from sounding_bench import scifact_claims

        claims = [
            c for c in scifact_claims.load_claims(scifact, "train") if not scifact_claims.held_out(c.id)
        ]
        added = scifact_claims.claim_pairs(scifact, claims, hard_negatives)
        console.print(f"adding {len(added)} pairs from {len(claims)} SciFact train claims")
        pairs = [*pairs, *added]
    out = settings.models.cache_dir / (name or nli.TRAINED_DIR)
    total = steps or nli.steps_for(len(pairs), epochs, batch_size)
    with StepProgress(console, f"training on {len(pairs)} pairs") as progress:
        report = nli.train(
            pairs,
            out,
            total,
            batch_size,
            learning_rate,
            on_step=lambda step, total, loss: progress.update(step, total, f"loss {loss:.3f}"),
            balanced=balanced,
        )
    resumed = f", resumed at step {report.resumed_from}" if report.resumed_from else ""
    console.print(
        f"saved to {report.path}: {report.steps} steps ({report.epochs_run:.2f} epochs{resumed}) in "
        f"{report.seconds:.0f} s, last loss {report.final_loss:.3f}"
    )
