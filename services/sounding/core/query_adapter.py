"""A linear map on query embeddings learned from observed outcomes (issue 22, "better rankings,
learned honestly": a query-side adapter trained from (query, used document) pairs).

The documents' embeddings stay as ingested; a query's embedding x is searched with
normalise(W x). W starts at the identity and minimises, over the training outcomes,

    mean_i [ logsumexp_c (s_ic / T) - logsumexp_{c in P_i} (s_ic / T) ] + lambda * ||W - I||_F^2

where s_ic is the cosine of the mapped query i with chunk c of the pool, P_i the chunks of the
documents outcome i used, and T a temperature: the softmax likelihood of the used documents'
chunks against the pool. L-BFGS (scipy) with the exact gradient.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

DEFAULT_TEMPERATURE = 0.05
DEFAULT_REGULARIZATION = 0.01
DEFAULT_MAX_ITERATIONS = 200


def adapted(matrix: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """normalise(W x) for each row x of `vectors` (one vector or a matrix of them), float32."""
    mapped = np.asarray(vectors, dtype=np.float64) @ matrix.T
    norms = np.linalg.norm(mapped, axis=-1, keepdims=True)
    return (mapped / np.maximum(norms, 1e-12)).astype(np.float32)


def fit(
    queries: np.ndarray,
    positives: Sequence[np.ndarray],
    pool: np.ndarray,
    temperature: float = DEFAULT_TEMPERATURE,
    regularization: float = DEFAULT_REGULARIZATION,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> np.ndarray:
    """W (d x d) fitted to queries (n x d, unit rows) whose used chunks are the rows `positives[i]`
    of `pool` (c x d, unit rows). Every query needs at least one positive."""
    n, d = queries.shape
    if len(positives) != n or any(len(p) == 0 for p in positives):
        raise ValueError("every query needs at least one used chunk")
    x = np.asarray(queries, dtype=np.float64)
    chunks = np.asarray(pool, dtype=np.float64)
    mask = np.zeros((n, len(chunks)), dtype=bool)
    for i, rows in enumerate(positives):
        mask[i, rows] = True
    identity = np.eye(d)

    def loss_and_gradient(flat: np.ndarray) -> tuple[float, np.ndarray]:
        w = flat.reshape(d, d)
        mapped = x @ w.T
        norms = np.linalg.norm(mapped, axis=1, keepdims=True)
        unit = mapped / norms
        logits = unit @ chunks.T / temperature
        positive_logits = np.where(mask, logits, -np.inf)
        pool_lse = np.asarray(logsumexp(logits, axis=1))
        positive_lse = np.asarray(logsumexp(positive_logits, axis=1))
        loss = float(np.mean(pool_lse - positive_lse))
        # d loss / d logits: softmax over the pool minus softmax over the positives.
        d_logits = (softmax(logits, axis=1) - softmax(positive_logits, axis=1)) / n
        d_unit = d_logits @ chunks / temperature
        d_mapped = (d_unit - unit * np.sum(d_unit * unit, axis=1, keepdims=True)) / norms
        gradient = d_mapped.T @ x
        loss += regularization * float(np.sum((w - identity) ** 2))
        gradient += 2 * regularization * (w - identity)
        return loss, gradient.ravel()

    result = minimize(
        loss_and_gradient,
        identity.ravel(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iterations},
    )
    return result.x.reshape(d, d)


def scored_document_rankings(
    queries: np.ndarray, pool: np.ndarray, pool_documents: np.ndarray, depth: int = 100
) -> list[list[tuple[str, float]]]:
    """Each query's ranking of the pool's documents (each by its best chunk, cosine), the first
    `depth` with their cosines, the queries searched as given."""
    scores = np.asarray(queries, dtype=np.float32) @ np.asarray(pool, dtype=np.float32).T
    rankings = []
    for row in scores:
        ranked: dict[str, float] = {}
        for chunk in np.argsort(-row, kind="stable"):
            ranked.setdefault(str(pool_documents[chunk]), float(row[chunk]))
            if len(ranked) == depth:
                break
        rankings.append(list(ranked.items()))
    return rankings


def ranked_ids(rankings: Sequence[Sequence[tuple[str, float]]]) -> list[list[str]]:
    """Scored rankings without their scores."""
    return [[document for document, _ in ranking] for ranking in rankings]


def ndcg_at_10(rankings: Sequence[Sequence[str]], used: Sequence[set[str]]) -> float:
    """Mean nDCG@10 (binary gains) of each query's used documents in its ranking."""
    total = 0.0
    for ranking, relevant in zip(rankings, used, strict=True):
        gain = sum(
            1 / np.log2(rank + 2) for rank, document in enumerate(ranking[:10]) if document in relevant
        )
        ideal = sum(1 / np.log2(rank + 2) for rank in range(min(10, len(relevant))))
        total += gain / ideal
    return float(total / len(used))
