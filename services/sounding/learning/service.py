"""LearningService: plans which arms a Retrieve runs (the selector's plan; a planned query advances
its counter), remembers what each arm found, and turns observed outcomes into rewards for the
strategy selector (adaptive-strategy spec §5–§6).

- `remember` registers a finished retrieval in memory at once (so an Observe sent right after
  the Final event finds it) and appends it to the log in the background, batched (at most one
  commit a second; an Observe waits for the pending ones). A crash can lose the last second of
  retrievals that nobody observed yet, never an acknowledged observation. A failed append is
  retried with the next; until a retrieval is in the log, outcomes for it are refused
  (UNAVAILABLE), so no observation is ever durable for a retrieval that is not.
- `observe` validates a stream's outcomes, commits the accepted ones to the log in one append,
  and only then updates the selector and acknowledges; a cancel cannot separate the commit from
  the update. Unknown or already observed retrievals (the log is asked) are reported back per
  observation; the others are still recorded.
- `restore` rebuilds the selector by replaying the observation log in order, from the window
  and without the arms the latest deployed recalibration chose.
- `recalibrate` prunes and retrains the selector, deploying it only if it validates (§6.3–§6.4).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from sounding.core.calibration import ConfidenceCalibration, MissRateCalibration
from sounding.core.uncertainty import MissHistory
from sounding.learning import calibration, features
from sounding.learning.metrics import ObservedRun, RunSummary, StrategyMetrics, strategy_metrics
from sounding.learning.outcomes import contributions, invalid, logged_outcome, logged_plan_rewards, rewards
from sounding.learning.protocol import (
    CalibrationProgress,
    CalibrationReport,
    ObserveResult,
    Rejected,
    RetrievalOutcome,
)
from sounding.learning.query_adapter import QueryAdapters
from sounding.learning.recalibration import MIN_OBSERVATIONS, Observed, recalibrate
from sounding.learning.selection import Plan, SelectionConfig, StrategySelector
from sounding.runtime import errors, telemetry
from sounding.runtime.offload import completed
from sounding.store.learning import Deployment, LearningLog, ObservationRecord, RetrievalRecord

log = logging.getLogger(__name__)
_METER = telemetry.meter()
_ARM_RUNS = _METER.create_counter("sounding.retrieval.arm.runs", description="arms run by Retrieve")
_ARM_LATENCY = _METER.create_histogram("sounding.retrieval.arm.duration", unit="s", description="arm runtime")
_ARM_REWARD = _METER.create_histogram("sounding.retrieval.arm.reward", description="observed reward per arm")
# Retrievals kept in memory for Observe (the others are read back from the log): at most this
# many, holding at most RECENT_DOCUMENT_IDS document ids together.
RECENT_RETRIEVALS = 10_000
RECENT_DOCUMENT_IDS = 1_000_000
RETRIEVAL_FLUSH_INTERVAL_S = 1.0


@dataclass(frozen=True)
class LearningConfig:
    """The arms the selector chooses among, how it chooses, and the window of recent
    observations Calibrate(BANDIT) retrains on."""

    arms: tuple[str, ...]
    selection: SelectionConfig = SelectionConfig()
    recalibration_window_s: float = 30 * 24 * 3600.0


class LearningService:
    def __init__(self, log_: LearningLog, config: LearningConfig):
        self._log = log_
        self._arms = config.arms
        self._selection = config.selection
        self._recalibration_window_s = config.recalibration_window_s
        self.selector = StrategySelector(self._arms, self._selection)
        self.deployment: Deployment | None = None
        self.miss_rate_calibration: MissRateCalibration | None = None
        self.confidence_calibration: ConfidenceCalibration | None = None
        self.query_adapters = QueryAdapters(log_, self.logged)
        self.miss_history = MissHistory(self._selection.history_capacity)
        self._recent: OrderedDict[str, RetrievalRecord] = OrderedDict()
        self._recent_ids = 0
        self._unwritten: list[RetrievalRecord] = []
        # Retrievals remembered but not yet durably in the log.
        self._unlogged: set[str] = set()
        self._flusher: asyncio.Task | None = None
        self._flush_now = asyncio.Event()
        self._flush_interval_s = RETRIEVAL_FLUSH_INTERVAL_S
        self._sequence = 0
        self._lock = asyncio.Lock()

    @classmethod
    async def restore(cls, learning_log: LearningLog, config: LearningConfig) -> LearningService:
        """A service whose selector has replayed the logged observations, in order."""
        service = cls(learning_log, config)
        await service._rebuild()
        latest = await learning_log.latest_calibration("miss_rate")
        if latest is not None:
            service.miss_rate_calibration = MissRateCalibration.from_params(*latest)
        latest = await learning_log.latest_calibration("confidence")
        if latest is not None:
            service.confidence_calibration = ConfidenceCalibration.from_params(*latest)
        await service.query_adapters.restore()
        service.selector.queries_planned = await learning_log.next_query_index()
        return service

    async def _logged(
        self, observations: list[ObservationRecord] | None = None
    ) -> list[tuple[ObservationRecord, RetrievalRecord]]:
        """Each logged observation (all of them unless given) with the retrieval it is about.
        Reads only: the in-memory bookkeeping is `_rebuild`'s and `observe`'s."""
        if observations is None:
            observations = await self._log.observations()
        retrievals = await self._log.retrievals(o.retrieval_id for o in observations)
        logged = []
        for observation in observations:
            record = retrievals.get(observation.retrieval_id)
            if record is None:
                log.warning("observation %d refers to an unlogged retrieval", observation.sequence)
            else:
                logged.append((observation, record))
        return logged

    async def _rebuild(self) -> None:
        """The selector of the latest deployment (its arms and window), replaying the log (on a
        worker thread: the log can be long)."""
        self.deployment = await self._log.latest_deployment()
        window_start = self.deployment.window_start_us if self.deployment else 0
        pruned = set(self.deployment.pruned_arms) if self.deployment else set()
        observations = await self._log.observations()
        logged = await self._logged(observations)

        def replay() -> tuple[StrategySelector, MissHistory]:
            selector = StrategySelector([a for a in self._arms if a not in pruned], self._selection)
            history = MissHistory(self._selection.history_capacity)
            for seen, record in logged:
                if seen.create_time_us >= window_start:
                    selector.learn(record.context, record.embedding, logged_plan_rewards(seen, record))
                history.add(record.embedding, calibration.reported_missing(seen.outcome))
            return selector, history

        selector, history = await asyncio.to_thread(replay)
        selector.queries_planned = self.selector.queries_planned
        self._sequence = observations[-1].sequence + 1 if observations else 0
        self.selector = selector
        self.miss_history = history

    async def recalibrate(self) -> AsyncGenerator[CalibrationProgress | CalibrationReport, None]:
        """§6.3–§6.4: retrain on the recent window without pruned arms, validate on the latest
        observations, deploy if at least 95% as good as the incumbent. Streams progress, then the
        outcome. FailedPrecondition with too few observations."""
        async with self._lock:
            yield CalibrationProgress("reading the observation log", 0.0)
            await self.wait_written()
            logged = await self._logged()
            # Every plan's rewards are recomputed from the logged rankings: off the event loop.
            observed = await asyncio.to_thread(lambda: [Observed.of(o, r) for o, r in logged])
            if len(observed) < MIN_OBSERVATIONS:
                raise errors.FailedPrecondition(
                    f"recalibration needs at least {MIN_OBSERVATIONS} observed retrievals; "
                    f"{len(observed)} are recorded",
                    reason="TOO_FEW_OUTCOMES",
                )
            yield CalibrationProgress("training and validating", 0.3)
            window_start = int((time.time() - self._recalibration_window_s) * 1e6)
            incumbent = self.deployment
            result = await asyncio.to_thread(
                recalibrate,
                observed,
                self._arms,
                self._selection.alpha,
                features.DIMENSION,
                window_start,
                incumbent.window_start_us if incumbent else 0,
                incumbent.pruned_arms if incumbent else [],
            )
            version = incumbent.version if incumbent else 0
            if result.deploy:
                yield CalibrationProgress("deploying", 0.8)
                version += 1
                report = {"summary": result.summary(), "candidate_score": result.candidate_score}
                # One commit, then the selector it describes; no await can interleave an Observe.
                await self._log.append_deployment(
                    Deployment(version, window_start, result.pruned_arms, report)
                )
                await self._rebuild()
            yield CalibrationReport(
                "bandit",
                version,
                result.training_size + result.holdout_size,
                result.deploy,
                result.summary(),
                result.diagnostics(),
            )

    async def calibrate_miss_rate(self) -> AsyncGenerator[CalibrationProgress | CalibrationReport, None]:
        """Fit the stated miss rate (and recall) to the observed outcomes, version it, persist it,
        and report miss rate and recall as measured from then on. FailedPrecondition with fewer
        than MIN_OUTCOMES usable outcomes."""
        async with self._lock:
            yield CalibrationProgress("reading the observation log", 0.0)
            await self.wait_written()
            outcomes = [
                calibration.outcome(r.stated_miss_rate, o.outcome)
                for o, r in await self._logged()
                if r.stated_miss_rate is not None
            ]
            if len(outcomes) < calibration.MIN_OUTCOMES:
                raise errors.FailedPrecondition(
                    f"Calibrate(MISS_RATE) needs at least {calibration.MIN_OUTCOMES} observed retrievals "
                    f"that stated a miss rate; {len(outcomes)} are recorded",
                    reason="TOO_FEW_OUTCOMES",
                )
            yield CalibrationProgress("fitting", 0.4)
            version = (self.miss_rate_calibration.version if self.miss_rate_calibration else 0) + 1
            fitted, diagnostics, curves = await asyncio.to_thread(calibration.fit, outcomes, version)
            await self._log.append_calibration("miss_rate", version, fitted.params(), diagnostics)
            self.miss_rate_calibration = fitted
            summary = (
                f"miss-rate map v{version} from {len(outcomes)} outcomes: ECE "
                f"{diagnostics['miss_rate_ece_before']:.3f} -> {diagnostics['miss_rate_ece_after']:.3f} "
                "(on the outcomes fitted)"
            )
            yield CalibrationReport("miss_rate", version, len(outcomes), True, summary, diagnostics, curves)

    async def calibrate_confidence(self) -> AsyncGenerator[CalibrationProgress | CalibrationReport, None]:
        """Fit the stated conservative confidence to whether the agent succeeded; if the map
        validates, version it, persist it, and state the confidence as measured from then on
        (learning.calibration: the validation). FailedPrecondition with
        fewer than MIN_OUTCOMES observed retrievals that stated one and report agent_success."""
        async with self._lock:
            yield CalibrationProgress("reading the observation log", 0.0)
            await self.wait_written()
            outcomes = [
                (r.stated_confidence, bool(o.outcome["agent_success"]))
                for o, r in await self._logged()
                if r.stated_confidence is not None and o.outcome["agent_success"] is not None
            ]
            if len(outcomes) < calibration.MIN_OUTCOMES:
                raise errors.FailedPrecondition(
                    f"Calibrate(CONFIDENCE) needs at least {calibration.MIN_OUTCOMES} observed retrievals "
                    f"that stated a confidence and report agent_success; {len(outcomes)} are recorded",
                    reason="TOO_FEW_OUTCOMES",
                )
            yield CalibrationProgress("fitting and validating", 0.4)
            incumbent = self.confidence_calibration.version if self.confidence_calibration else 0
            fit = await asyncio.to_thread(calibration.fit_confidence, outcomes, incumbent + 1)
            d = fit.diagnostics
            figures = (
                f"ECE {d['confidence_ece_before']:.3f} stated, {d['confidence_ece_cross_validated']:.3f} "
                f"mapped by fits on the other folds, {d['confidence_ece_after']:.3f} on the outcomes fitted"
            )
            if fit.deploy:
                await self._log.append_calibration("confidence", incumbent + 1, fit.calibration.params(), d)
                self.confidence_calibration = fit.calibration
                summary = f"deployed confidence map v{incumbent + 1} from {len(outcomes)} outcomes: {figures}"
            else:
                kept = f"confidence map v{incumbent}" if incumbent else "the confidence as stated"
                summary = (
                    f"kept {kept}: the map fitted to {len(outcomes)} outcomes does not validate ({figures})"
                )
            version = incumbent + 1 if fit.deploy else incumbent
            yield CalibrationReport("confidence", version, len(outcomes), fit.deploy, summary, d, fit.curves)

    async def logged(self) -> list[tuple[ObservationRecord, RetrievalRecord]]:
        """Every logged observation with its retrieval, once the remembered retrievals are written."""
        async with self._lock:
            await self.wait_written()
            return await self._logged()

    async def metrics(self) -> StrategyMetrics:
        """§8 metrics over everything logged so far."""
        await self.wait_written()
        summaries = await self._log.retrieval_summaries()
        observed = [
            ObservedRun(o.rewards, contributions(r, o.outcome["used_document_ids"]))
            for o, r in await self._logged()
        ]
        return await asyncio.to_thread(
            strategy_metrics,
            [RunSummary(mode, arms) for mode, arms in summaries],
            observed,
            self._arms,
            self.deployment.pruned_arms if self.deployment else [],
            self.deployment.version if self.deployment else 0,
        )

    def features(self, query: str, embedding: ArrayLike, graph_entities: int = 0) -> np.ndarray:
        return features.query_features(
            query, embedding, graph_entities, self.selector.similar_outcomes(embedding)
        )

    def plan(self, context: np.ndarray, requested: Sequence[str]) -> Plan:
        return self.selector.plan(context, requested)

    def remember(self, record: RetrievalRecord) -> None:
        for arm, ran in record.arms.items():
            attributes = {
                "sounding.arm": arm,
                "sounding.plan.mode": record.mode,
                "sounding.plan.exploration": bool(ran["exploration"]),
            }
            _ARM_RUNS.add(1, attributes)
            _ARM_LATENCY.record(ran["latency_ms"] / 1000, {"sounding.arm": arm})
        self._recent[record.retrieval_id] = record
        self._recent_ids += _document_ids(record)
        while len(self._recent) > RECENT_RETRIEVALS or self._recent_ids > RECENT_DOCUMENT_IDS:
            _, oldest = self._recent.popitem(last=False)
            self._recent_ids -= _document_ids(oldest)
        self._unwritten.append(record)
        self._unlogged.add(record.retrieval_id)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        """Writes remembered retrievals in batches, at most one commit per flush interval (a
        commit per query would compete with the queries), or at once when someone waits. A
        failed write keeps its retrievals for the next (the oldest are given up beyond
        RECENT_RETRIEVALS waiting)."""
        try:
            await asyncio.wait_for(self._flush_now.wait(), self._flush_interval_s)
        except TimeoutError:
            pass
        self._flush_now.clear()
        while self._unwritten:
            batch, self._unwritten = self._unwritten, []
            try:
                await self._log.append_retrievals(batch)
            except Exception:
                log.exception("could not log %d retrievals; the next write retries them", len(batch))
                self._unwritten = batch + self._unwritten
                self._give_up_oldest_unwritten()
                return
            self._unlogged.difference_update(r.retrieval_id for r in batch)

    async def _records(self, retrieval_ids: set[str]) -> dict[str, RetrievalRecord]:
        """The retrievals, from memory (recent, or still waiting to be written) or the log."""
        held = {r.retrieval_id: r for r in self._unwritten} | self._recent
        found = {i: held[i] for i in retrieval_ids if i in held}
        missing = retrieval_ids - set(found)
        if missing:
            found.update(await self._log.retrievals(missing))
        return found

    def _give_up_oldest_unwritten(self) -> None:
        """Waiting retrievals beyond RECENT_RETRIEVALS, or RECENT_DOCUMENT_IDS ids, are dropped,
        oldest first (outcomes for them are then NOT_FOUND)."""
        count, ids = len(self._unwritten), sum(map(_document_ids, self._unwritten))
        dropped = 0
        while count - dropped > RECENT_RETRIEVALS or ids > RECENT_DOCUMENT_IDS:
            ids -= _document_ids(self._unwritten[dropped])
            dropped += 1
        for record in self._unwritten[:dropped]:
            self._unlogged.discard(record.retrieval_id)
            if self._recent.pop(record.retrieval_id, None) is not None:
                self._recent_ids -= _document_ids(record)
        self._unwritten = self._unwritten[dropped:]

    async def wait_written(self) -> None:
        """Until every remembered retrieval is in the log, or an attempt to write them failed
        (those stay unlogged, for the next attempt)."""
        if self._unwritten and (self._flusher is None or self._flusher.done()):
            self._flusher = asyncio.ensure_future(self._flush())
        while self._flusher is not None and not self._flusher.done():
            self._flush_now.set()
            await asyncio.shield(self._flusher)

    async def observe(self, outcomes: Sequence[RetrievalOutcome]) -> ObserveResult:
        """Record a stream's retrieval outcomes; rejections name their position in `outcomes`."""
        rejected: list[Rejected] = []
        valid: list[tuple[int, RetrievalOutcome]] = []
        for index, outcome in enumerate(outcomes):
            problem = invalid(outcome)
            if problem:
                rejected.append(Rejected(index, "INVALID_ARGUMENT", problem))
            else:
                valid.append((index, outcome))
        async with self._lock:
            # An observation must never be durable while the retrieval it refers to is not.
            await self.wait_written()
            records = await self._records({o.retrieval_id for _, o in valid})
            observed = await self._log.observed_retrievals({o.retrieval_id for _, o in valid})
            accepted: list[tuple[RetrievalOutcome, RetrievalRecord, dict[str, float]]] = []
            for index, outcome in valid:
                record = records.get(outcome.retrieval_id)
                if record is None:
                    rejected.append(
                        Rejected(index, "NOT_FOUND", f"no retrieval {outcome.retrieval_id[:64]!r}")
                    )
                elif outcome.retrieval_id in observed:
                    rejected.append(
                        Rejected(
                            index,
                            "ALREADY_EXISTS",
                            f"retrieval {outcome.retrieval_id!r} was already observed",
                        )
                    )
                elif outcome.retrieval_id in self._unlogged:
                    rejected.append(
                        Rejected(
                            index,
                            "UNAVAILABLE",
                            f"retrieval {outcome.retrieval_id!r} is not logged yet (its write failed); retry",
                        )
                    )
                else:
                    observed.add(outcome.retrieval_id)
                    accepted.append((outcome, record, rewards(record, outcome)))
            await completed(self._commit(accepted))  # the lock is held until the commit is done
        return ObserveResult(len(accepted), sorted(rejected, key=lambda r: r.index))

    async def _commit(
        self, accepted: list[tuple[RetrievalOutcome, RetrievalRecord, dict[str, float]]]
    ) -> None:
        """The accepted outcomes into the log in one append, then into the selector."""
        entries = [
            ObservationRecord(self._sequence + i, outcome.retrieval_id, logged_outcome(outcome), arm_rewards)
            for i, (outcome, _, arm_rewards) in enumerate(accepted)
        ]
        records = [record for _, record, _ in accepted]
        plans = await asyncio.to_thread(list, map(logged_plan_rewards, entries, records))
        entries = [replace(e, plan_rewards=rewarded) for e, rewarded in zip(entries, plans, strict=True)]
        await self._log.append_observations(entries)
        self._sequence += len(entries)
        for (_, record, arm_rewards), entry, rewarded in zip(accepted, entries, plans, strict=True):
            for arm, value in arm_rewards.items():
                _ARM_REWARD.record(value, {"sounding.arm": arm})
            self.selector.learn(record.context, record.embedding, rewarded)
            self.miss_history.add(record.embedding, calibration.reported_missing(entry.outcome))

    async def close(self) -> None:
        await self.wait_written()


def _document_ids(record: RetrievalRecord) -> int:
    return 1 + sum(len(ran["document_ids"]) for ran in record.arms.values())
