"""Calibrate(QUERY_ADAPTER): a collection's query adapter (core.query_adapter) fitted to the
outcomes observed for its retrievals, validated on the latest of them, versioned, and used by
Retrieve from then on (issue 22, item 2).

- Training data: each observed retrieval of the collection (since it was created) whose outcome
  names documents, as (the query's embedding as Retrieve logged it, the used and the missed
  documents, those the caller reported it needed but was not given, still in the collection).
- Validation: the latest HOLDOUT_SHARE of them (at least MIN_HOLDOUT), in log order, are left out
  of the fit; the candidate is deployed only if its nDCG@10 of their documents (the dense ranking
  of the pool) is above the incumbent's (the deployed adapter, or the base embeddings). On the
  same outcomes the fusion is chosen, method and dense weight together: the adapted dense
  ranking (as deep as the other arms' logged rankings) fused with the rankings the retrieval's
  other arms logged, weighted 1 each, by min-max fusion or RRF, whichever ranks their documents
  best. Min-max needs the arms' logged scores; outcomes logged without them leave RRF alone
  (issue 53, item 3: the zero-shot fusion stays only where it validates with the adapter).
- Pool: every chunk of a collection of at most POOL_CHUNKS chunks; a larger one contributes a
  uniform sample of POOL_CHUNKS chunks plus the used documents' chunks.
- An adapter belongs to one incarnation of its collection (its creation time): a collection
  deleted and created again under the same name starts from the base embeddings.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sounding.core import query_adapter
from sounding.core.fusion import MIN_MAX, RRF, Fusion
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
    # The fusion validated with it (adapters fitted before the choice was made were RRF's).
    fusion: str = RRF

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
            "fusion": self.fusion,
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
            str(params.get("fusion", RRF)),
        )


@dataclass(frozen=True)
class Outcome:
    """One observed retrieval as the adapter learns from it."""

    embedding: np.ndarray
    # The documents it used or missed that the collection holds.
    needed: set[str]
    # The rankings the retrieval's other arms logged (the dense arm's is recomputed).
    other_rankings: dict[str, list[str]]
    # Their scores, in the same order, where they were logged.
    other_scores: dict[str, list[float]] = field(default_factory=dict)

    @property
    def scored(self) -> bool:
        return all(arm in self.other_scores for arm in self.other_rankings)


@dataclass(frozen=True)
class Fitted:
    deploy: bool
    matrix: np.ndarray
    dense_fusion_weight: float
    fusion: str
    diagnostics: dict[str, float]


def fit_and_validate(
    outcomes: Sequence[Outcome], pool_documents: np.ndarray, pool: np.ndarray, incumbent: np.ndarray | None
) -> Fitted:
    """Fit on all but the latest outcomes; on those, score candidate, incumbent and base embeddings
    (the dense ranking alone), and choose the fusion of the candidate's ranking with the other arms
    the held-out retrievals ran: min-max or RRF, with the dense weight among DENSE_FUSION_WEIGHTS
    (on a tie min-max, then the smallest weight). Min-max competes where at least MIN_HOLDOUT of
    those retrievals logged their arms' scores, and the comparison is then over those alone.
    ValueError below MIN_OUTCOMES outcomes."""
    if len(outcomes) < MIN_OUTCOMES:
        raise ValueError(f"a query adapter needs at least {MIN_OUTCOMES} outcomes, has {len(outcomes)}")
    holdout = max(MIN_HOLDOUT, round(HOLDOUT_SHARE * len(outcomes)))
    queries = np.stack([o.embedding for o in outcomes]).astype(np.float64)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    rows = [np.flatnonzero(np.isin(pool_documents, list(o.needed))) for o in outcomes[:-holdout]]
    matrix = query_adapter.fit(queries[:-holdout], rows, pool)
    held, held_outcomes = queries[-holdout:], outcomes[-holdout:]
    needed = [o.needed for o in held_outcomes]

    def dense(matrix: np.ndarray | None) -> list[list[tuple[str, float]]]:
        searched = held if matrix is None else query_adapter.adapted(matrix, held)
        return query_adapter.scored_document_rankings(searched, pool, pool_documents)

    candidate_rankings = dense(matrix)
    base = query_adapter.ndcg_at_10(query_adapter.ranked_ids(dense(None)), needed)
    candidate = query_adapter.ndcg_at_10(query_adapter.ranked_ids(candidate_rankings), needed)
    current = (
        base
        if incumbent is None
        else query_adapter.ndcg_at_10(query_adapter.ranked_ids(dense(incumbent)), needed)
    )
    fused = [i for i, o in enumerate(held_outcomes) if o.other_rankings]
    scored = [i for i in fused if held_outcomes[i].scored]
    compared, methods = (scored, (MIN_MAX, RRF)) if len(scored) >= MIN_HOLDOUT else (fused, (RRF,))
    by_fusion = {
        (method, weight): query_adapter.ndcg_at_10(
            [_fused(candidate_rankings[i], held_outcomes[i], Fusion(method), weight) for i in compared],
            [needed[i] for i in compared],
        )
        for method in methods
        for weight in (DENSE_FUSION_WEIGHTS if len(compared) >= MIN_HOLDOUT else ())
    }
    method, weight = max(by_fusion, key=lambda f: by_fusion[f], default=(RRF, 1.0))
    return Fitted(
        deploy=bool(candidate > current),
        matrix=matrix.astype(np.float32),
        dense_fusion_weight=weight,
        fusion=method,
        diagnostics={
            "holdout_ndcg_at_10_candidate": candidate,
            "holdout_ndcg_at_10_incumbent": current,
            "holdout_ndcg_at_10_base": base,
            "training_size": float(len(outcomes) - holdout),
            "holdout_size": float(holdout),
            "pool_chunks": float(len(pool)),
            "dense_fusion_weight": weight,
            "fusion_min_max": float(method == MIN_MAX),
            "fusion_holdout_size": float(len(compared)),
            **{
                f"holdout_{'fused' if m == RRF else 'min_max'}_ndcg_at_10_dense_weight_{w:g}": v
                for (m, w), v in by_fusion.items()
            },
        },
    )


def _fused(
    dense: list[tuple[str, float]], outcome: Outcome, fusion: Fusion, dense_weight: float
) -> list[str]:
    """The top 10 of `fusion` over the dense ranking, cut as deep as the other arms' logged ones,
    and theirs (with their scores where min-max needs them)."""
    depth = max(len(r) for r in outcome.other_rankings.values()) or len(dense)
    rankings = {
        "dense": dense[:depth],
        **{
            arm: list(zip(r, outcome.other_scores.get(arm) or [0.0] * len(r), strict=True))
            for arm, r in outcome.other_rankings.items()
        },
    }
    return [item.key for item in fusion.fuse(rankings, {"dense": dense_weight}, limit=10)]


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
                {arm: scores for arm, scores in r.arm_scores.items() if arm != "dense"},
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
            f"validated on {d['holdout_size']:.0f}; fusion {fitted.fusion}, dense weight "
            f"{fitted.dense_fusion_weight:g}"
        )
        if fitted.deploy:
            # Versions count on across the collection's incarnations: the latest row is the one in use.
            latest = self._deployed.get(collection)
            version = (latest.version if latest else 0) + 1
            adapter = QueryAdapter(
                version, fitted.matrix, create_time_us, fitted.dense_fusion_weight, fitted.fusion
            )
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
