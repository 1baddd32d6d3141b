"""Past queries' embeddings, each with a value, for "what happened to the most similar queries"
(the selector's similar-outcomes feature, the historical miss-rate signal)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


class NearestValues:
    """Unit vectors with one value each, at most `capacity` of them (the most recent: once full,
    each new one replaces the oldest), in buffers that grow by doubling up to the capacity: a
    lookup is one matrix-vector product over the rows in use, never a copy of the history."""

    INITIAL_CAPACITY = 64

    def __init__(self, dtype: type = np.float64, capacity: int = 20_000) -> None:
        self._dtype = dtype
        self._capacity = capacity
        self._vectors = np.empty((0, 0), dtype=dtype)
        self._values = np.empty(0)
        self._size = 0
        self._added = 0

    def __len__(self) -> int:
        return self._size

    def add(self, embedding: ArrayLike, value: float) -> None:
        vector = np.asarray(embedding, dtype=self._dtype)
        if self._size == len(self._values) and self._size < self._capacity:
            grow = min(max(self.INITIAL_CAPACITY, self._size), self._capacity - self._size)
            self._vectors = np.concatenate(
                [self._vectors.reshape(-1, len(vector)), np.empty((grow, len(vector)), self._dtype)]
            )
            self._values = np.concatenate([self._values, np.empty(grow)])
        row = self._added % self._capacity
        self._vectors[row] = vector / max(float(np.linalg.norm(vector)), 1e-12)
        self._values[row] = value
        self._added += 1
        self._size = min(self._added, self._capacity)

    def nearest(self, embedding: ArrayLike, count: int) -> np.ndarray:
        """The values of the `count` most cosine-similar vectors (all of them if fewer; ties
        broken arbitrarily but deterministically)."""
        if self._size <= count:
            return self._values[: self._size].copy()
        query = np.asarray(embedding, dtype=self._dtype)
        similarity = self._vectors[: self._size] @ (query / max(float(np.linalg.norm(query)), 1e-12))
        return self._values[np.argpartition(-similarity, count - 1)[:count]]
