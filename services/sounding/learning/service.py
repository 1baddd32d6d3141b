"""LearningService: plans which arms a Retrieve runs, remembers what each arm found, and turns
observed outcomes into rewards for the strategy selector (adaptive-strategy spec §5–§6).

- `plan` asks the selector (a planned query advances its counter).
- `remember` registers a finished retrieval in memory at once (so an Observe sent right after
  the Final event finds it) and appends it to the log in the background, batched.
- `observe` validates a stream's outcomes, commits the accepted ones to the log in one append,
  and only then updates the selector and acknowledges. Unknown or already observed retrievals
  are reported back per observation; the others are still recorded.
- `restore` rebuilds the selector by replaying the observation log in order.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sounding.core.bandit import contribution, reward
from sounding.retrieval import features
from sounding.retrieval.selection import Plan, SelectionConfig, StrategySelector
from sounding.store.learning import LearningLog, ObservationRecord, RetrievalRecord

log = logging.getLogger(__name__)
RECENT_RETRIEVALS = 10_000
FEEDBACK_VALUES = ("", "helpful", "not_helpful")


@dataclass(frozen=True)
class RetrievalOutcome:
    retrieval_id: str
    used_document_ids: tuple[str, ...] = ()
    feedback: str = ""
    agent_success: bool | None = None
    found_missing_content: bool = False
    missed_document_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rejected:
    index: int
    code: str
    message: str


@dataclass(frozen=True)
class ObserveResult:
    recorded: int
    rejected: list[Rejected]


class LearningService:
    def __init__(self, log_: LearningLog, selector: StrategySelector):
        self._log = log_
        self.selector = selector
        self._recent: OrderedDict[str, RetrievalRecord] = OrderedDict()
        self._unwritten: list[RetrievalRecord] = []
        self._written = asyncio.Event()
        self._flusher: asyncio.Task | None = None
        self._observed: set[str] = set()
        self._sequence = 0
        self._observe_lock = asyncio.Lock()

    @classmethod
    async def restore(
        cls, learning_log: LearningLog, arms: Sequence[str], config: SelectionConfig
    ) -> LearningService:
        """A service whose selector has replayed every logged observation, in order."""
        service = cls(learning_log, StrategySelector(arms, config))
        observations = await learning_log.observations()
        retrievals = await learning_log.retrievals(o.retrieval_id for o in observations)
        for observation in observations:
            record = retrievals.get(observation.retrieval_id)
            if record is None:
                log.warning("observation %d refers to an unlogged retrieval", observation.sequence)
                continue
            service.selector.learn(record.context, record.embedding, observation.rewards)
            service._observed.add(observation.retrieval_id)
        service._sequence = observations[-1].sequence + 1 if observations else 0
        service.selector.queries_planned = await learning_log.next_query_index()
        return service

    def features(self, query: str, embedding: Sequence[float]) -> np.ndarray:
        return features.query_features(
            query, embedding, similar_outcomes=self.selector.similar_outcomes(embedding)
        )

    def plan(self, context: np.ndarray, requested: Sequence[str]) -> Plan:
        return self.selector.plan(context, requested)

    def remember(self, record: RetrievalRecord) -> None:
        self._recent[record.retrieval_id] = record
        while len(self._recent) > RECENT_RETRIEVALS:
            self._recent.popitem(last=False)
        self._unwritten.append(record)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        while self._unwritten:
            batch, self._unwritten = self._unwritten, []
            try:
                await self._log.append_retrievals(batch)
            except Exception:
                log.exception("could not log %d retrievals; Observe will not find them", len(batch))
                for record in batch:
                    self._recent.pop(record.retrieval_id, None)

    async def _records(self, retrieval_ids: set[str]) -> dict[str, RetrievalRecord]:
        found = {i: self._recent[i] for i in retrieval_ids if i in self._recent}
        missing = retrieval_ids - set(found)
        if missing:
            found.update(await self._log.retrievals(missing))
        return found

    async def wait_written(self) -> None:
        """Until every remembered retrieval is in the log."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)

    async def observe(self, outcomes: Sequence[RetrievalOutcome | Rejected]) -> ObserveResult:
        """Record a stream's outcomes (a `Rejected` stands for one the gateway could not read)."""
        rejected = [o for o in outcomes if isinstance(o, Rejected)]
        valid: list[tuple[int, RetrievalOutcome]] = []
        for index, outcome in enumerate(outcomes):
            if isinstance(outcome, Rejected):
                continue
            problem = _invalid(outcome)
            if problem:
                rejected.append(Rejected(index, "INVALID_ARGUMENT", problem))
            else:
                valid.append((index, outcome))
        async with self._observe_lock:
            records = await self._records({o.retrieval_id for _, o in valid})
            accepted: list[tuple[RetrievalOutcome, RetrievalRecord, dict[str, float]]] = []
            seen = set(self._observed)
            for index, outcome in valid:
                record = records.get(outcome.retrieval_id)
                if record is None:
                    rejected.append(Rejected(index, "NOT_FOUND", f"no retrieval {outcome.retrieval_id!r}"))
                elif outcome.retrieval_id in seen:
                    rejected.append(
                        Rejected(
                            index,
                            "ALREADY_EXISTS",
                            f"retrieval {outcome.retrieval_id!r} was already observed",
                        )
                    )
                else:
                    seen.add(outcome.retrieval_id)
                    accepted.append((outcome, record, rewards(record, outcome)))
            entries = [
                ObservationRecord(
                    self._sequence + i, outcome.retrieval_id, _outcome_json(outcome), arm_rewards
                )
                for i, (outcome, _, arm_rewards) in enumerate(accepted)
            ]
            # An observation must never be durable while the retrieval it refers to is not.
            await self.wait_written()
            await self._log.append_observations(entries)
            self._sequence += len(entries)
            for outcome, record, arm_rewards in accepted:
                self._observed.add(outcome.retrieval_id)
                self.selector.learn(record.context, record.embedding, arm_rewards)
        return ObserveResult(len(entries), sorted(rejected, key=lambda r: r.index))

    async def close(self) -> None:
        await self.wait_written()


def rewards(record: RetrievalRecord, outcome: RetrievalOutcome) -> dict[str, float]:
    """§5.4 for each arm that ran: the share of the used documents it found, the feedback bonus,
    and its latency penalty."""
    return {
        arm: reward(
            contribution(ran["document_ids"], outcome.used_document_ids), outcome.feedback, ran["latency_ms"]
        )
        for arm, ran in record.arms.items()
    }


def _invalid(outcome: RetrievalOutcome) -> str:
    if not outcome.retrieval_id:
        return "retrieval_id must be set"
    if outcome.feedback not in FEEDBACK_VALUES:
        return f"feedback must be one of {FEEDBACK_VALUES}"
    return ""


def _outcome_json(outcome: RetrievalOutcome) -> dict:
    return {
        "used_document_ids": list(outcome.used_document_ids),
        "feedback": outcome.feedback,
        "agent_success": outcome.agent_success,
        "found_missing_content": outcome.found_missing_content,
        "missed_document_ids": list(outcome.missed_document_ids),
    }
