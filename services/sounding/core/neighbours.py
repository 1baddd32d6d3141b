"""Past queries' embeddings, each with a value, for "what happened to the most similar queries"
(the selector's similar-outcomes feature, the historical miss-rate signal)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike


class NearestValues:
    """Unit vectors (float32, as the encoder gives them) with one value each, at most `capacity`
    of them (the most recent: once full, each new one replaces the oldest), in buffers that grow
    by doubling up to the capacity: a lookup is one matrix-vector product over the rows in use,
    never a copy of the history."""

    INITIAL_CAPACITY = 64

    def __init__(self, capacity: int = 20_000) -> None:
        self._capacity = capacity
        self._vectors = np.empty((0, 0), dtype=np.float32)
        self._values = np.empty(0)
        self._size = 0
        self._added = 0

    def __len__(self) -> int:
        return self._size

    def add(self, embedding: ArrayLike, value: float) -> None:
        self.add_many([embedding], [value])

    def add_many(
        self, embeddings: Sequence[ArrayLike] | np.ndarray, values: Sequence[float] | np.ndarray
    ) -> None:
        """Rows of `embeddings` with their values, in order (as many `add`s, in one pass)."""
        vectors = np.asarray(embeddings, dtype=np.float32)
        values = np.asarray(values, dtype=float)
        if not len(values):
            return
        # Of more rows than the capacity, only the last `capacity` stay: the others are skipped,
        # counted as added, so every kept row lands where one `add` at a time would put it.
        self._added += max(len(values) - self._capacity, 0)
        vectors, values = vectors[-self._capacity :], values[-self._capacity :]
        needed = min(self._size + len(values), self._capacity)
        if needed > len(self._values):
            length = min(self._capacity, max(needed, 2 * len(self._values), self.INITIAL_CAPACITY))
            grow = length - len(self._values)
            self._vectors = np.concatenate(
                [self._vectors.reshape(-1, vectors.shape[1]), np.empty((grow, vectors.shape[1]), np.float32)]
            )
            self._values = np.concatenate([self._values, np.empty(grow)])
        norms = np.sqrt(np.maximum(np.einsum("ij,ij->i", vectors, vectors), 1e-24))[:, None]
        # The rows land from the oldest one on, wrapping around to the buffers' start once.
        start = self._added % self._capacity
        for rows, part in (
            (slice(start, start + len(values)), slice(0, self._capacity - start)),
            (slice(0, max(start + len(values) - self._capacity, 0)), slice(self._capacity - start, None)),
        ):
            np.divide(vectors[part], norms[part], out=self._vectors[rows])
            self._values[rows] = values[part]
        self._added += len(values)
        self._size = min(self._added, self._capacity)

    def nearest(self, embedding: ArrayLike, count: int) -> np.ndarray:
        """The values of the `count` most cosine-similar vectors (all of them if fewer; ties
        broken arbitrarily but deterministically)."""
        if self._size <= count:
            return self._values[: self._size].copy()
        query = np.asarray(embedding, dtype=np.float32)
        similarity = self._vectors[: self._size] @ (query / max(float(np.linalg.norm(query)), 1e-12))
        return self._values[np.argpartition(-similarity, count - 1)[:count]]
