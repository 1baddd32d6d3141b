"""LearningService: plans which arms a Retrieve runs (the selector's plan; a planned query advances
its counter), remembers what each arm found, and turns observed outcomes into rewards for the
strategy selector (adaptive-strategy spec §5–§6).

- `remember` hands a finished retrieval to `learning.remembered` (held for Observe at once,
  logged in the background), and measures each arm's cost for the selector and each expansion
  step's latency for the gate.
- `observe` validates a stream's outcomes (waiting briefly for retrievals another orchestrator
  ran to reach the log), commits the accepted ones to the log in one append,
  and only then updates the selector and acknowledges; a cancel cannot separate the commit from
  the update. Unknown or already observed retrievals (the log is asked), and those not logged
  yet (UNAVAILABLE), are reported back per observation; the others are still recorded. The
  rewards are computed off the event loop and learned in one vectorised pass per stream.
- `restore` rebuilds the selector by replaying the observation log in order, from the window
  and without the arms the latest deployed recalibration chose; and the expansion gate
  (`core.expansion_gate`) from every observed retrieval's expansion steps.
- `recalibrate` prunes and retrains the selector, deploying it only if it validates (§6.3–§6.4).
- `follow_log` keeps this process's state up with what other orchestrators on the store record:
  their observations are learned from as this process's own are; a deployment or calibration
  of theirs is put in force (`runtime.following`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from sounding.core.calibration import ConfidenceCalibration, MissRateCalibration
from sounding.core.expansion_gate import ExpansionGate, ExpansionGateConfig
from sounding.core.plans import plan_rewards_many
from sounding.core.uncertainty import MissHistory
from sounding.learning import calibration, features
from sounding.learning.maps import CalibratedMaps
from sounding.learning.metrics import ObservedRun, RunSummary, StrategyMetrics, strategy_metrics
from sounding.learning.outcomes import (
    contributions,
    invalid,
    logged_outcome,
    logged_plan_rewards,
    plan_inputs,
    rewards_many,
)
from sounding.learning.protocol import (
    CalibrationProgress,
    CalibrationReport,
    ObserveResult,
    Rejected,
    RetrievalOutcome,
)
from sounding.learning.query_adapter import QueryAdapters
from sounding.learning.recalibration import MIN_OBSERVATIONS, Observed, recalibrate
from sounding.learning.remembered import RememberedRetrievals
from sounding.learning.selection import Plan, SelectionConfig, StrategySelector
from sounding.runtime import errors, telemetry
from sounding.runtime.following import SeenStamps, follow
from sounding.runtime.offload import completed
from sounding.store.learning import Deployment, LearningLog, ObservationRecord, RetrievalRecord

log = logging.getLogger(__name__)
_METER = telemetry.meter()
_ARM_RUNS = _METER.create_counter("sounding.retrieval.arm.runs", description="arms run by Retrieve")
_ARM_LATENCY = _METER.create_histogram("sounding.retrieval.arm.duration", unit="s", description="arm runtime")
_ARM_REWARD = _METER.create_histogram("sounding.retrieval.arm.reward", description="observed reward per arm")


@dataclass(frozen=True)
class LearningConfig:
    """The arms the selector chooses among (those assumed costly before their first run), how it
    chooses, the window of recent observations Calibrate(BANDIT) retrains on, how the
    expansion loop's steps are judged, and how often the log is read for what other
    orchestrators recorded."""

    arms: tuple[str, ...]
    selection: SelectionConfig = SelectionConfig()
    recalibration_window_s: float = 30 * 24 * 3600.0
    assumed_costly: tuple[str, ...] = ()
    expansion_gate: ExpansionGateConfig = ExpansionGateConfig()
    follow_interval_s: float = 0.5


class LearningService(CalibratedMaps):
    def __init__(self, log_: LearningLog, config: LearningConfig):
        self._log = log_
        self._arms = config.arms
        self._selection = config.selection
        self._recalibration_window_s = config.recalibration_window_s
        self._follow_interval_s = config.follow_interval_s
        self._assumed_costly = config.assumed_costly
        self.selector = StrategySelector(self._arms, self._selection, self._assumed_costly)
        self.expansion_gate = ExpansionGate(config.expansion_gate)
        self.deployment: Deployment | None = None
        self.miss_rate_calibration: MissRateCalibration | None = None
        self.confidence_calibration: ConfidenceCalibration | None = None
        self.query_adapters = QueryAdapters(log_, self.logged)
        self.miss_history = MissHistory(self._selection.history_capacity)
        self.remembered = RememberedRetrievals(log_)
        self.seen: SeenStamps[str] = SeenStamps()
        self._versions: tuple[int, int, int] | None = None
        self._following: asyncio.Task | None = None
        self._sequence = 0
        self._lock = asyncio.Lock()

    @classmethod
    async def restore(cls, learning_log: LearningLog, config: LearningConfig) -> LearningService:
        """A service whose selector has replayed the logged observations, in order."""
        service = cls(learning_log, config)
        service._versions = await learning_log.versions()
        await service._rebuild()
        await service._load_calibrations()
        await service.query_adapters.restore()
        service.selector.queries_planned = await learning_log.next_query_index()
        return service

    def follow_log(self) -> None:
        """Catch up with the log every `follow_interval_s` from now until `close`."""
        self._following = asyncio.get_running_loop().create_task(
            follow(self.catch_up, self._follow_interval_s, "the learning log")
        )

    async def catch_up(self) -> None:
        """Learn from the observations other processes logged since the last look, and put in
        force a selector deployment, calibration or query adapter of theirs; nothing is read
        while no table moved."""
        versions = await self._log.versions()
        if versions == self._versions:
            return
        async with self._lock:
            self._versions = versions
            deployment = await self._log.latest_deployment()
            if (deployment and deployment.version) != (self.deployment and self.deployment.version):
                await self._rebuild()
            else:
                unseen = [
                    o
                    for o in await self._log.observations(self.seen.since_us)
                    if o.retrieval_id not in self.seen
                ]
                logged = await self._logged(unseen)
                self._learn([record for _, record in logged], [seen for seen, _ in logged])
                self.remembered.mark_observed([o.retrieval_id for o in unseen])
                self.seen.add((o.retrieval_id, o.create_time_us) for o in unseen)
            await self._load_calibrations()
            await self.query_adapters.restore()

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

        def replay() -> tuple[StrategySelector, MissHistory, ExpansionGate]:
            selector = StrategySelector(
                [a for a in self._arms if a not in pruned],
                self._selection,
                self._assumed_costly,
                self.selector.costs,
            )
            history = MissHistory(self._selection.history_capacity)
            gate = ExpansionGate(self.expansion_gate.config, self.expansion_gate.step_latency)
            windowed = [(seen, record) for seen, record in logged if seen.create_time_us >= window_start]
            selector.learn_many(
                [record.context for _, record in windowed],
                [record.embedding for _, record in windowed],
                [logged_plan_rewards(seen, record) for seen, record in windowed],
            )
            history.add_many(
                [record.embedding for _, record in logged],
                [calibration.reported_missing(seen.outcome) for seen, _ in logged],
            )
            for seen, record in logged:
                gate.learn(record.collection, record.expansions, seen.outcome["used_document_ids"])
            return selector, history, gate

        selector, history, gate = await asyncio.to_thread(replay)
        selector.queries_planned = self.selector.queries_planned
        self._sequence = max((o.sequence for o in observations), default=-1) + 1
        self.seen = SeenStamps[str]()
        self.seen.add((o.retrieval_id, o.create_time_us) for o in observations)
        self.remembered.mark_observed([o.retrieval_id for o in observations])
        self.selector = selector
        self.miss_history = history
        self.expansion_gate = gate

    async def recalibrate(self) -> AsyncGenerator[CalibrationProgress | CalibrationReport, None]:
        """§6.3–§6.4: retrain on the recent window without pruned arms, validate on the latest
        observations, deploy if at least 95% as good as the incumbent. Streams progress, then the
        outcome. FailedPrecondition with too few observations."""
        async with self._lock:
            yield CalibrationProgress("reading the observation log", 0.0)
            await self.remembered.wait_written()
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

    async def logged(self) -> list[tuple[ObservationRecord, RetrievalRecord]]:
        """Every logged observation with its retrieval, once the remembered retrievals are written."""
        async with self._lock:
            await self.remembered.wait_written()
            return await self._logged()

    async def metrics(self) -> StrategyMetrics:
        """§8 metrics over everything logged so far."""
        await self.remembered.wait_written()
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
            self.selector.costs.measured(arm, ran["cost_ms"])
        for step in record.expansions:
            self.expansion_gate.step_latency.measured(step.strategy, step.latency_ms)
        self.remembered.add(record)

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
        asked = {o.retrieval_id for _, o in valid}
        logged_elsewhere = await self._others_retrievals(asked)
        async with self._lock:
            # An observation must never be durable while the retrieval it refers to is not.
            await self.remembered.wait_written()
            records = await self.remembered.records(asked - set(logged_elsewhere)) | logged_elsewhere
            observed = await self.remembered.observed({o.retrieval_id for _, o in valid})
            accepted: list[tuple[RetrievalOutcome, RetrievalRecord]] = []
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
                elif self.remembered.unlogged(outcome.retrieval_id):
                    rejected.append(
                        Rejected(
                            index,
                            "UNAVAILABLE",
                            f"retrieval {outcome.retrieval_id!r} is not logged yet (its write failed); retry",
                        )
                    )
                else:
                    observed.add(outcome.retrieval_id)
                    accepted.append((outcome, record))
            await completed(self._commit(accepted))  # the lock is held until the commit is done
        return ObserveResult(len(accepted), sorted(rejected, key=lambda r: r.index))

    async def _others_retrievals(self, retrieval_ids: set[str]) -> dict[str, RetrievalRecord]:
        """Those of the retrievals not in memory here, as logged (by another orchestrator on the
        store, or before a restart). If some are not logged either, the orchestrator that ran them
        gets two of its flush intervals to log them before they are looked up again (those still
        missing are refused NOT_FOUND)."""
        missing = self.remembered.not_held(retrieval_ids)
        if not missing:
            return {}
        found = await self._log.retrievals(missing)
        if len(found) < len(missing):
            await asyncio.sleep(2 * self.remembered.flush_interval_s)
            found |= await self._log.retrievals(missing - set(found))
        return found

    async def _commit(self, accepted: list[tuple[RetrievalOutcome, RetrievalRecord]]) -> None:
        """The accepted outcomes into the log in one append, then into the selector, the miss
        history and the expansion gate, each in one pass; the rewards are computed off the event
        loop."""
        if not accepted:
            return
        first = self._sequence
        tops = [self.remembered.tops(record.retrieval_id) for _, record in accepted]

        def entries() -> list[ObservationRecord]:
            logged = [logged_outcome(outcome) for outcome, _ in accepted]
            plans = plan_rewards_many(
                [plan_inputs(r, o, t) for (_, r), o, t in zip(accepted, logged, tops, strict=True)]
            )
            arms = rewards_many([(record, outcome) for outcome, record in accepted])
            return [
                ObservationRecord(first + i, outcome.retrieval_id, said, arm_rewards, plan_rewards=rewarded)
                for i, ((outcome, _), said, arm_rewards, rewarded) in enumerate(
                    zip(accepted, logged, arms, plans, strict=True)
                )
            ]

        observations = await asyncio.to_thread(entries)
        stamp = await self._log.append_observations(observations)
        self.remembered.mark_observed([entry.retrieval_id for entry in observations])
        self.seen.add((entry.retrieval_id, stamp) for entry in observations)
        self._sequence += len(observations)
        for entry in observations:
            for arm, value in entry.rewards.items():
                _ARM_REWARD.record(value, {"sounding.arm": arm})
        self._learn([record for _, record in accepted], observations)

    def _learn(self, records: list[RetrievalRecord], observations: Sequence[ObservationRecord]) -> None:
        """Observed retrievals into the selector, the miss history and the expansion gate."""
        if not records:
            return
        embeddings = np.asarray([r.embedding for r in records], dtype=np.float32)
        self.selector.learn_many(
            [r.context for r in records],
            embeddings,
            [entry.plan_rewards or {} for entry in observations],
        )
        self.miss_history.add_many(
            embeddings, [calibration.reported_missing(entry.outcome) for entry in observations]
        )
        for record, entry in zip(records, observations, strict=True):
            self.expansion_gate.learn(
                record.collection, record.expansions, entry.outcome["used_document_ids"]
            )

    async def close(self) -> None:
        if self._following is not None:
            self._following.cancel()
        await self.remembered.wait_written()
