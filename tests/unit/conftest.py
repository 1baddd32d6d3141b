from dataclasses import dataclass

import numpy as np
import pytest


def unit_rows(rows) -> np.ndarray:
    rows = np.asarray(rows, dtype=float)
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


@dataclass(frozen=True)
class PreferenceProblem:
    """Embedded queries over a pool of 2 documents per topic: `near{t}` lies in the query's
    direction, `used{t}` is that direction turned towards a shared axis. The directions share a
    common component, as sentence embeddings do, which a linear map can turn towards the axis."""

    queries: np.ndarray
    pool: np.ndarray
    documents: np.ndarray
    topics: int

    def used(self, systematic: bool) -> list[set[str]]:
        """Each query's used document: `used{t}` when agents prefer it systematically, else `near{t}`
        (what the base embeddings already rank first)."""
        return [{f"used{t}" if systematic else f"near{t}"} for t in range(self.topics)]


@pytest.fixture
def preference_problem():
    def build(topics: int, seed: int = 1, dimension: int = 16) -> PreferenceProblem:
        rng = np.random.default_rng(seed)
        axis, common = np.eye(dimension)[0], np.eye(dimension)[1]
        spread = rng.normal(size=(topics, dimension)) * np.r_[0.0, np.ones(dimension - 1)]
        directions = unit_rows(spread + 1.5 * common)
        pool = np.vstack([directions, unit_rows(directions + 0.8 * axis)])
        names = [f"near{t}" for t in range(topics)] + [f"used{t}" for t in range(topics)]
        queries = unit_rows(directions + rng.normal(scale=0.05, size=directions.shape))
        return PreferenceProblem(queries, pool, np.array(names, dtype=object), topics)

    return build
