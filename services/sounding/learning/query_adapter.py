"""Calibrate(QUERY_ADAPTER): a collection's query adapter (core.query_adapter) fitted to the
outcomes observed for its retrievals, validated on the latest of them, versioned, and used by
Retrieve from then on (issue 22, item 2).

- Training data: each observed retrieval of the collection (since it was created) whose outcome
  names documents, as (the query's embedding as Retrieve logged it, the used and the missed
  documents, those the caller reported it needed but was not given, still in the collection).
- Validation: the latest HOLDOUT_SHARE of them (at least MIN_HOLDOUT), in log order, are left out
  of the fit; the candidate is deployed only if its nDCG@10 of their documents (the dense ranking
  of the pool) is above the incumbent's (the deployed adapter, or the base embeddings). On the
  same outcomes the dense arm's fusion weight is chosen: its adapted ranking fused by RRF with
  the rankings the retrieval's other arms logged, weighted 1 each.
- Pool: every chunk of a collection of at most POOL_CHUNKS chunks; a larger one contributes a
  uniform sample of POOL_CHUNKS chunks plus the used documents' chunks.
- An adapter belongs to one incarnation of its collection (its creation time): a collection
  deleted and created again under the same name starts from the base embeddings.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sounding.core import query_adapter
from sounding.core.fusion import weighted_rrf
from sounding.learning.protocol import CalibrationProgress, CalibrationReport
from sounding.retrieval.protocol import PoolReader
from sounding.runtime import errors
from sounding.store.learning import LearningLog, ObservationRecord, RetrievalRecord
from sounding.store.tenancy import ResourceRef

MIN_OUTCOMES = 50
HOLDOUT_SHARE = 0.2
MIN_HOLDOUT = 10
# The dense arm's fusion weight (against 1 for every other arm) is chosen among these.
DENSE_FUSION_WEIGHTS = (1.0, 1.5, 2.0, 3.0, 4.0)
POOL_CHUNKS = 20_000
TARGET_PREFIX = "query_adapter:"


@dataclass(frozen=True)
class QueryAdapter:
    version: int
    matrix: np.ndarray
    # The creation time of the collection incarnation it was fitted for.
    collection_create_time_us: int
    dense_fusion_weight: float = 1.0

    def search_vector(self, embedding: np.ndarray) -> np.ndarray:
        return query_adapter.adapted(self.matrix, embedding)

    @property
    def fusion_weights(self) -> dict[str, float]:
        """Factors on the arms' fusion weights in a plan."""
        return {"dense": self.dense_fusion_weight}

    def params(self) -> dict:
        return {
            "dimension": int(self.matrix.shape[0]),
            "matrix": base64.b64encode(self.matrix.astype("<f4").tobytes()).decode("ascii"),
            "collection_create_time_us": self.collection_create_time_us,
            "dense_fusion_weight": self.dense_fusion_weight,
        }

    @classmethod
    def from_params(cls, version: int, params: dict) -> QueryAdapter:
        dimension = int(params["dimension"])
        matrix = np.frombuffer(base64.b64decode(params["matrix"]), dtype="<f4").reshape(dimension, dimension)
        return cls(
            version,
            matrix.astype(np.float32),
            int(params["collection_create_time_us"]),
            float(params.get("dense_fusion_weight", 1.0)),
        )


@dataclass(frozen=True)
class Outcome:
    """One observed retrieval as the adapter learns from it."""

    embedding: np.ndarray
    # The documents it used or missed that the collection holds.
    needed: set[str]
    # The rankings the retrieval's other arms logged (the dense arm's is recomputed).
    other_rankings: dict[str, list[str]]


@dataclass(frozen=True)
class Fitted:
    deploy: bool
    matrix: np.ndarray
    dense_fusion_weight: float
    diagnostics: dict[str, float]


def fit_and_validate(
    outcomes: Sequence[Outcome], pool_documents: np.ndarray, pool: np.ndarray, incumbent: np.ndarray | None
) -> Fitted:
    """Fit on all but the latest outcomes; on those, score candidate, incumbent and base embeddings
    (the dense ranking alone), and choose the dense arm's fusion weight among DENSE_FUSION_WEIGHTS
    (RRF with the other arms the held-out retrievals ran; the smallest weight on a tie). ValueError
    below MIN_OUTCOMES outcomes."""
    if len(outcomes) < MIN_OUTCOMES:
        raise ValueError(f"a query adapter needs at least {MIN_OUTCOMES} outcomes, has {len(outcomes)}")
    holdout = max(MIN_HOLDOUT, round(HOLDOUT_SHARE * len(outcomes)))
    queries = np.stack([o.embedding for o in outcomes]).astype(np.float64)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    rows = [np.flatnonzero(np.isin(pool_documents, list(o.needed))) for o in outcomes[:-holdout]]
    matrix = query_adapter.fit(queries[:-holdout], rows, pool)
    held, held_outcomes = queries[-holdout:], outcomes[-holdout:]
    needed = [o.needed for o in held_outcomes]

    def dense(matrix: np.ndarray | None) -> list[list[str]]:
        searched = held if matrix is None else query_adapter.adapted(matrix, held)
        return query_adapter.document_rankings(searched, pool, pool_documents)

    candidate_rankings = dense(matrix)
    base = query_adapter.ndcg_at_10(dense(None), needed)
    candidate = query_adapter.ndcg_at_10(candidate_rankings, needed)
    current = base if incumbent is None else query_adapter.ndcg_at_10(dense(incumbent), needed)
    fused = [i for i, o in enumerate(held_outcomes) if o.other_rankings]
    by_weight = {
        weight: query_adapter.ndcg_at_10(
            [_fused(candidate_rankings[i], held_outcomes[i].other_rankings, weight) for i in fused],
            [needed[i] for i in fused],
        )
        for weight in (DENSE_FUSION_WEIGHTS if len(fused) >= MIN_HOLDOUT else ())
    }
    weight = max(by_weight, key=lambda w: by_weight[w], default=1.0)
    return Fitted(
        deploy=bool(candidate > current),
        matrix=matrix.astype(np.float32),
        dense_fusion_weight=weight,
        diagnostics={
            "holdout_ndcg_at_10_candidate": candidate,
            "holdout_ndcg_at_10_incumbent": current,
            "holdout_ndcg_at_10_base": base,
            "training_size": float(len(outcomes) - holdout),
            "holdout_size": float(holdout),
            "pool_chunks": float(len(pool)),
            "dense_fusion_weight": weight,
            "fusion_holdout_size": float(len(fused)),
            **{f"holdout_fused_ndcg_at_10_dense_weight_{w:g}": v for w, v in by_weight.items()},
        },
    )


def _fused(dense: list[str], others: dict[str, list[str]], dense_weight: float) -> list[str]:
    rankings = {
        "dense": [(d, 0.0) for d in dense],
        **{arm: [(d, 0.0) for d in r] for arm, r in others.items()},
    }
    return [item.key for item in weighted_rrf(rankings, {"dense": dense_weight}, limit=10)]


class QueryAdapters:
    """A tenant's deployed adapters, one per collection (the latest validated version). One
    calibration runs at a time; Observe is not held up while one fits."""

    def __init__(
        self,
        learning_log: LearningLog,
        logged: Callable[[], Awaitable[list[tuple[ObservationRecord, RetrievalRecord]]]],
    ):
        self._log = learning_log
        self._logged = logged
        self._deployed: dict[ResourceRef, QueryAdapter] = {}
        self._lock = asyncio.Lock()

    async def restore(self) -> None:
        for target, (version, params) in (await self._log.calibrations_with_prefix(TARGET_PREFIX)).items():
            collection = ResourceRef.from_key(target.removeprefix(TARGET_PREFIX))
            self._deployed[collection] = QueryAdapter.from_params(version, params)

    def of(self, collection: ResourceRef, create_time_us: int) -> QueryAdapter | None:
        """The adapter deployed for this incarnation of the collection, if any."""
        adapter = self._deployed.get(collection)
        return adapter if adapter and adapter.collection_create_time_us == create_time_us else None

    async def calibrate(
        self, collection: ResourceRef, create_time_us: int, read_pool: PoolReader
    ) -> AsyncGenerator[CalibrationProgress | CalibrationReport, None]:
        """Fit, validate and (if better) deploy the adapter of the collection from
        its observed retrievals. FailedPrecondition with fewer than MIN_OUTCOMES of them that name
        documents the collection holds."""
        async with self._lock:
            async for event in self._calibrate(collection, create_time_us, read_pool):
                yield event

    async def _calibrate(
        self, collection: ResourceRef, create_time_us: int, read_pool: PoolReader
    ) -> AsyncGenerator[CalibrationProgress | CalibrationReport, None]:
        yield CalibrationProgress("reading the observation log", 0.0)
        of_collection = [
            (_needed(o.outcome), r)
            for o, r in await self._logged()
            if r.collection == collection.key and r.create_time_us >= create_time_us
        ]
        logged = [(needed, r) for needed, r in of_collection if needed]
        wanted = set().union(*(needed for needed, _ in logged))
        yield CalibrationProgress("reading the collection's embeddings", 0.2)
        pool_documents, pool = await read_pool(wanted, POOL_CHUNKS)
        present = set(pool_documents.tolist())
        usable = [
            Outcome(
                np.asarray(r.embedding, dtype=np.float32),
                needed & present,
                {arm: ran["document_ids"] for arm, ran in r.arms.items() if arm != "dense"},
            )
            for needed, r in logged
            if needed & present
        ]
        if len(usable) < MIN_OUTCOMES:
            raise errors.FailedPrecondition(
                f"Calibrate(QUERY_ADAPTER) needs at least {MIN_OUTCOMES} observed retrievals of the "
                f"collection that used or missed documents it holds; {len(usable)} are recorded",
                reason="TOO_FEW_OUTCOMES",
            )
        yield CalibrationProgress("fitting and validating", 0.4)
        current = self.of(collection, create_time_us)
        incumbent = None if current is None else current.matrix
        fitted = await asyncio.to_thread(fit_and_validate, usable, pool_documents, pool, incumbent)
        d = fitted.diagnostics
        figures = (
            f"held-out nDCG@10 {d['holdout_ndcg_at_10_candidate']:.4f} against "
            f"{d['holdout_ndcg_at_10_incumbent']:.4f} in use (base embeddings "
            f"{d['holdout_ndcg_at_10_base']:.4f}), fitted on {d['training_size']:.0f} outcomes, "
            f"validated on {d['holdout_size']:.0f}; dense fusion weight {fitted.dense_fusion_weight:g}"
        )
        if fitted.deploy:
            # Versions count on across the collection's incarnations: the latest row is the one in use.
            latest = self._deployed.get(collection)
            version = (latest.version if latest else 0) + 1
            adapter = QueryAdapter(version, fitted.matrix, create_time_us, fitted.dense_fusion_weight)
            await self._log.append_calibration(TARGET_PREFIX + collection.key, version, adapter.params(), d)
            self._deployed[collection] = adapter
            summary = f"deployed query adapter v{version}: {figures}"
        else:
            version = current.version if current else 0
            summary = f"kept {f'query adapter v{version}' if current else 'the base embeddings'}: {figures}"
        yield CalibrationReport("query_adapter", version, len(usable), fitted.deploy, summary, d)


def _needed(outcome: dict) -> set[str]:
    """The documents a logged outcome says the query needed: those used and those missed."""
    return {*outcome["used_document_ids"], *(outcome["missed_document_ids"] or ())}
