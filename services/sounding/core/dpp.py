"""Greedy DPP slate selection (robust-MI spec §2.7.1): a diverse, high-quality subset of
candidate questions before they are scored.

The kernel is L = diag(q) S diag(q) with the RBF similarity S_ij = exp(−‖e_i − e_j‖² / σ²) of
the candidates' embeddings and q their quality. The slate starts with the best candidate and
grows by the candidate of largest marginal gain in log det L_Y, computed with the incremental
Cholesky update of Chen, Zhang and Zhou (NeurIPS 2018) in O(M·m²); it stops early when no
candidate adds volume (the rest are duplicates of the slate).
"""

from __future__ import annotations

import numpy as np

DEFAULT_SLATE = 8
DEFAULT_SIGMA = 0.5
# Marginal gains (the squared Cholesky pivot) at or below this add no volume.
MIN_GAIN = 1e-10


def rbf_similarity(vectors: np.ndarray, sigma: float = DEFAULT_SIGMA) -> np.ndarray:
    squared = np.sum(vectors**2, axis=1)
    distances = np.maximum(squared[:, None] + squared[None, :] - 2.0 * vectors @ vectors.T, 0.0)
    return np.exp(-distances / sigma**2)


def greedy_slate(
    vectors: np.ndarray, quality: np.ndarray, size: int = DEFAULT_SLATE, sigma: float = DEFAULT_SIGMA
) -> list[int]:
    """Indices of the slate in the order chosen (at most `size`; fewer when the remaining
    candidates add no volume). Quality must be positive."""
    quality = np.asarray(quality, dtype=float)
    if len(quality) != len(vectors):
        raise ValueError("one quality per candidate")
    if np.any(quality <= 0):
        raise ValueError("quality must be positive")
    kernel = quality[:, None] * rbf_similarity(np.asarray(vectors, dtype=float), sigma) * quality[None, :]
    count = len(quality)
    gains = np.diag(kernel).copy()
    rows = np.zeros((min(size, count), count))
    chosen: list[int] = []
    while len(chosen) < min(size, count):
        candidates = np.where(np.isin(np.arange(count), chosen), -np.inf, gains)
        best = int(np.argmax(candidates))
        if candidates[best] <= MIN_GAIN:
            break
        step = len(chosen)
        row = (kernel[best] - rows[:step, best] @ rows[:step]) / np.sqrt(gains[best])
        rows[step] = row
        gains = gains - row**2
        chosen.append(best)
    return chosen
