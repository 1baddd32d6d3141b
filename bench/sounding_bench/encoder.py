"""`sounding eval encoder`: the sidecar's CPU encoders side by side in one run (issue 51, item 3).

Protocol, fixed before the first run:
- Encoders: MiniLM on torch fp32 (`TorchEmbedder`), on ONNX Runtime fp32 (`OnnxEmbedder`, the
  fused export) and on ONNX Runtime int8 (that export with its MatMul and attention weights
  dynamically quantised per channel), all in this process on the CPU with the sidecar's settings
  (texts per forward pass, the one-thread rule for small calls, the thread count).
- Quality: each encoder embeds the whole corpus and the split's queries; documents are ranked by
  exact dot product; nDCG@10 and recall@100 as BEIR reports them.
- Speed, alternating encoders in rounds so that a slow spell of the machine hits all alike:
  documents in batches of 64 (the ingest path's), queries in batches of 64 (the micro-batcher's
  largest), and single queries (a lone Retrieve's encode), whose p50 latency is reported.
- An encoder holds quality when its nDCG@10 is within 0.003 of torch's. It wins when it also
  encodes single queries faster (p50) and batches of queries at least as fast as torch, and
  documents at ≥ 0.95× torch's rate. The CPU default is ONNX fp32 if it wins (its vectors are
  torch's, so collections built either way keep working); int8, whose vectors differ, replaces
  it only by also being ≥ 10% faster than ONNX fp32 on single queries and on query batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sounding.settings.config import EmbedderSettings, ModelsSettings

from sounding_bench import beir, metrics

QUALITY_TOLERANCE = 0.003
DOCUMENT_RATE_FLOOR = 0.95
INT8_MARGIN = 1.10
BATCH = 64
DOCUMENTS_PER_ROUND = 256
QUERIES_PER_ROUND = 64


@dataclass(frozen=True)
class EncoderRun:
    data: Path
    split: str
    cache: Path
    # Documents encoded for quality (0: all); the tests use a few.
    documents: int = 0


Encode = Callable[[list[str]], np.ndarray]


def quantised_export(cache: Path, embedder: EmbedderSettings, threads: int) -> Encode:
    """The ONNX export, its weights quantised to int8 (made once under `cache`)."""
    import shutil

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from sounding.models.embedder import bundled_model_dir
    from sounding.models.onnx_embedder import OnnxEmbedder, exported

    source = exported(bundled_model_dir(), cache / "models")
    target = cache / "int8" / source.name
    if not (target / "model.onnx").exists():
        target.mkdir(parents=True, exist_ok=True)
        for name in ("tokenizer.json", "sounding.json"):
            shutil.copy(source / name, target / name)
        quantize_dynamic(
            source / "model.onnx",
            target / "model.partial.onnx",
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Attention"],
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        (target / "model.partial.onnx").rename(target / "model.onnx")
    return OnnxEmbedder(
        target, "onnx-int8", embedder.forward_batch_size, embedder.single_thread_max_texts, threads
    ).encode


def encoders(cache: Path, models: ModelsSettings) -> dict[str, Encode]:
    """The three encoders, with the sidecar's forward batch, one-thread rule and thread count."""
    from sounding.models.embedder import TorchEmbedder, bundled_model_dir
    from sounding.models.onnx_embedder import OnnxEmbedder, exported

    embedder, threads = models.embedder, models.torch_threads
    export = exported(bundled_model_dir(), cache / "models")
    return {
        "torch_fp32": TorchEmbedder(
            "cpu", embedder.forward_batch_size, embedder.single_thread_max_texts
        ).encode,
        "onnx_fp32": OnnxEmbedder(
            export, "onnx-fp32", embedder.forward_batch_size, embedder.single_thread_max_texts, threads
        ).encode,
        "onnx_int8": quantised_export(cache, embedder, threads),
    }


def _rounds(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def measure(spec: EncoderRun, encode_by_name: dict[str, Encode], console) -> dict:
    dataset = beir.load(spec.data, spec.split)
    corpus = dataset.corpus[: spec.documents or None]
    documents = [beir.document_text(d) for d in corpus]
    ids = [str(d["_id"]) for d in corpus]
    query_ids = sorted(dataset.queries)
    queries = [dataset.queries[q] for q in query_ids]
    names = list(encode_by_name)
    vectors = {name: [] for name in names}
    document_s = dict.fromkeys(names, 0.0)
    for turn, part in enumerate(_rounds(documents, DOCUMENTS_PER_ROUND)):
        # The order within a round turns, so no encoder always runs first.
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            started = time.perf_counter()
            vectors[name].extend(encode_by_name[name](batch) for batch in _rounds(part, BATCH))
            document_s[name] += time.perf_counter() - started
        console.print(f"documents {min((turn + 1) * DOCUMENTS_PER_ROUND, len(documents))}/{len(documents)}")
    query_s, single_ms = dict.fromkeys(names, 0.0), {name: [] for name in names}
    query_vectors = {name: [] for name in names}
    for turn, part in enumerate(_rounds(queries, QUERIES_PER_ROUND)):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            started = time.perf_counter()
            query_vectors[name].append(encode_by_name[name](part))
            query_s[name] += time.perf_counter() - started
            for text in part:
                started = time.perf_counter()
                encode_by_name[name]([text])
                single_ms[name].append((time.perf_counter() - started) * 1000)
    results = {}
    for name in names:
        corpus_vectors = np.concatenate(vectors[name])
        scores = np.concatenate(query_vectors[name]) @ corpus_vectors.T
        top = np.argsort(-scores, axis=1)[:, :100]
        rankings = {q: [ids[i] for i in row] for q, row in zip(query_ids, top, strict=True)}
        quality = metrics.per_query(rankings, dataset.qrels, query_ids)
        results[name] = {
            "ndcg@10": round(float(np.mean([v["ndcg@10"] for v in quality.values()])), 4),
            "recall@100": round(float(np.mean([v["recall@100"] for v in quality.values()])), 4),
            "documents_per_s": round(len(documents) / document_s[name], 2),
            "queries_per_s_batch_64": round(len(queries) / query_s[name], 1),
            "single_query_ms": metrics.percentiles(single_ms[name]),
            "per_query": {q: {"ndcg@10": round(quality[q]["ndcg@10"], 4)} for q in query_ids},
        }
    return {"documents": len(documents), "queries": len(queries), "encoders": results}


def verdict(encoders: dict[str, dict]) -> dict:
    """The protocol's reading of `measure`'s figures against torch fp32."""
    reference = encoders["torch_fp32"]

    def p50(name: str) -> float:
        return encoders[name]["single_query_ms"]["latency_ms_p50"]

    judged = {}
    for name, figures in encoders.items():
        if name == "torch_fp32":
            continue
        holds = abs(figures["ndcg@10"] - reference["ndcg@10"]) <= QUALITY_TOLERANCE
        ratios = {
            "ndcg@10_delta": round(figures["ndcg@10"] - reference["ndcg@10"], 4),
            "single_query_p50_ratio": round(p50(name) / p50("torch_fp32"), 3),
            "queries_batch_64_ratio": round(
                figures["queries_per_s_batch_64"] / reference["queries_per_s_batch_64"], 3
            ),
            "documents_ratio": round(figures["documents_per_s"] / reference["documents_per_s"], 3),
        }
        wins = (
            holds
            and ratios["single_query_p50_ratio"] < 1.0
            and ratios["queries_batch_64_ratio"] >= 1.0
            and ratios["documents_ratio"] >= DOCUMENT_RATE_FLOOR
        )
        judged[name] = {**ratios, "holds_quality": holds, "wins": wins}
    default = "onnx_fp32" if judged["onnx_fp32"]["wins"] else "torch_fp32"
    int8, fp32 = encoders["onnx_int8"], encoders["onnx_fp32"]
    if (
        judged["onnx_int8"]["wins"]
        and p50("onnx_fp32") >= INT8_MARGIN * p50("onnx_int8")
        and int8["queries_per_s_batch_64"] >= INT8_MARGIN * fp32["queries_per_s_batch_64"]
    ):
        default = "onnx_int8"
    return {"against_torch_fp32": judged, "cpu_default": default}


def run(spec: EncoderRun, models: ModelsSettings, console) -> dict:
    measured = measure(spec, encoders(spec.cache, models), console)
    return {**measured, "verdict": verdict(measured["encoders"])}
