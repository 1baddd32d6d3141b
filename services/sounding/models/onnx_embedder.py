"""The embedder on ONNX Runtime: a sentence-transformers model exported once into the models cache
(transformer, mean pooling and L2 normalisation in one graph; BERT-family graphs with attention,
layer norm and GELU fused by ONNX Runtime's transformer optimiser), then served without torch.

Its vectors are the torch model's to float precision, so a collection built with one serves
queries encoded by the other (`sounding eval encoder` measures both on SciFact in one run).
sentence-transformers' own ONNX backend would do the export, but it needs optimum-onnx, which
pins transformers below the version Sounding runs on.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from sounding.runtime.allocator import release_free_memory

# Bumped when the exported graph changes, so caches made by an older recipe are not reused.
EXPORT_RECIPE = "mean-normalize-fused-v1"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


class UnsupportedModel(ValueError):
    """The model's pipeline is not transformer, mean pooling, normalisation."""


def export_dir(cache_dir: Path, model_dir: Path) -> Path:
    """Where the export of the model in `model_dir` lives: named by a digest of the export recipe
    and of the model's files (names, sizes, first MiB)."""
    digest = hashlib.sha256(EXPORT_RECIPE.encode())
    for path in sorted(model_dir.rglob("*")):
        if path.is_file() and path.suffix in {".safetensors", ".bin", ".json", ".txt"}:
            digest.update(path.relative_to(model_dir).as_posix().encode())
            digest.update(str(path.stat().st_size).encode())
            with path.open("rb") as f:
                digest.update(f.read(1 << 20))
    return cache_dir / "onnx" / f"{model_dir.name}-{digest.hexdigest()[:16]}"


def export(model_dir: Path, target: Path) -> None:
    """Exports the sentence-transformers model in `model_dir` into `target` (model.onnx,
    tokenizer.json, sounding.json), atomically: a partial export is never mistaken for one."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu", model_kwargs={"attn_implementation": "eager"})
    kinds = [type(module).__name__ for module in model]
    pooling = getattr(model[1], "pooling_mode", None) if len(kinds) > 1 else None
    if kinds != ["Transformer", "Pooling", "Normalize"] or pooling != "mean":
        raise UnsupportedModel(
            f"{model_dir} is {kinds} (pooling {pooling!r}); the ONNX backend exports "
            "Transformer, Pooling (mean), Normalize models: set the embedder's backend to torch"
        )
    transformer: Any = model[0].auto_model.eval()  # pyright: ignore[reportAttributeAccessIssue]

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    sample = torch.ones(2, 8, dtype=torch.long)
    raw = partial / "raw.onnx"
    # The tracer warns about every data-dependent branch of the model; the graph is checked by use.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pipeline().eval(),
            (sample, torch.ones_like(sample), torch.zeros_like(sample)),
            str(raw),
            input_names=list(INPUT_NAMES),
            output_names=["embedding"],
            dynamic_axes={name: {0: "texts", 1: "tokens"} for name in INPUT_NAMES}
            | {"embedding": {0: "texts"}},
            opset_version=17,
            dynamo=False,
        )
    config = transformer.config
    if config.model_type == "bert":
        from onnxruntime.transformers import optimizer

        fused = optimizer.optimize_model(
            str(raw),
            model_type="bert",
            num_heads=config.num_attention_heads,
            hidden_size=config.hidden_size,
        )
        fused.save_model_to_file(str(partial / "model.onnx"))
        raw.unlink()
    else:
        raw.rename(partial / "model.onnx")
    model.tokenizer.backend_tokenizer.save(str(partial / "tokenizer.json"))
    dimension = model.get_embedding_dimension()
    (partial / "sounding.json").write_text(
        json.dumps({"max_seq_length": model.max_seq_length, "dimension": dimension})
    )
    try:
        partial.rename(target)
    except OSError:
        # Another process finished the same export first; theirs is as good.
        shutil.rmtree(partial, ignore_errors=True)
        if not (target / "sounding.json").exists():
            raise


def exported(model_dir: Path, cache_dir: Path) -> Path:
    """The export of the model in `model_dir` under `cache_dir`, made now if there is none."""
    target = export_dir(cache_dir, model_dir)
    if not (target / "sounding.json").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        export(model_dir, target)
    return target


class OnnxEmbedder:
    """Encodes texts into L2-normalised float32 vectors, as `TorchEmbedder` does, with the graph of
    an export directory (`exported`) on ONNX Runtime.

    Calls of at most `single_thread_max_texts` texts run on a one-thread session (the reason is
    `TorchEmbedder`'s); larger ones on a session of `threads` threads (0: ONNX Runtime's default), whose
    threads sleep rather than spin between calls so that they leave the cores to the other
    processes of a small machine."""

    def __init__(
        self,
        export: Path,
        model_name: str,
        batch_size: int = 64,
        single_thread_max_texts: int = 4,
        threads: int = 0,
    ):
        import onnxruntime
        from tokenizers import Tokenizer

        meta = json.loads((export / "sounding.json").read_text())
        self.model_name = model_name
        self.dimension = int(meta["dimension"])
        self._tokenizer = Tokenizer.from_file(str(export / "tokenizer.json"))
        self._tokenizer.enable_truncation(int(meta["max_seq_length"]))
        self._tokenizer.enable_padding()
        self._batch_size = batch_size
        self._single_thread_max_texts = single_thread_max_texts

        def session(count: int):
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = count
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return onnxruntime.InferenceSession(
                str(export / "model.onnx"), options, providers=["CPUExecutionProvider"]
            )

        self._session = session(threads)
        self._small_session = session(1) if single_thread_max_texts > 0 else self._session

    def encode(self, texts: list[str]) -> np.ndarray:
        small = len(texts) <= self._single_thread_max_texts
        session = self._small_session if small else self._session
        # Texts of like length share a pass, so padding costs little (as sentence-transformers does).
        order = np.argsort([-len(text) for text in texts], kind="stable")
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            rows = order[start : start + self._batch_size]
            encodings = self._tokenizer.encode_batch([texts[i] for i in rows])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            feeds = {
                "input_ids": ids,
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
            }
            vectors[rows] = np.asarray(session.run(None, feeds)[0])
        if not small:
            release_free_memory()
        return vectors
