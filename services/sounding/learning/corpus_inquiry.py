"""CorpusInquiryLearning: what a tenant's corpus inquiries learn (active-learning spec §5).

- The outcome model, one per collection: every executed query teaches it whether a query with
  those features reached unread text (`core.reach`); its predictions and measured costs feed
  the next sessions' expected gains.
- The sensor tables, per collection: an `InquiryOutcome` naming a finished corpus session and
  its verdict adds that session's soft outcomes to the verdict's column of the counts, and the
  table is the smoothed, normalised counts (`core.claim_evidence.SensorModel.fit`); until a
  session of the collection is observed, the default table. Each generation strategy also
  counts its own queries' outcomes, and its table is those counts with the collection's table
  as their prior (worth STRATEGY_PRIOR_WEIGHT outcomes per verdict): what a strategy's queries
  tend to find (a refutation finding contradicting text, say) makes its candidates' expected
  information gain its own, not their reach times a shared table's (active-learning spec §3.1).
- Prediction metrics: predicted against actual information gain, reach and cost, overall and
  over the last 10 and 100 queries (`core.information.OutcomeLearner`).

Everything is rebuilt from the tenant's corpus inquiry log when it opens (`store.corpus_inquiry`),
and what other orchestrators on the store log is followed from then on (`catch_up`; README,
"Scaling out").
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np

from sounding.core.claim_evidence import OUTCOMES, VERDICTS, SensorModel, sensor_counts
from sounding.core.information import OutcomeLearner, PredictionMetrics
from sounding.core.query_scoring import FEATURE_SET, prior_reach_model
from sounding.core.reach import ReachModel
from sounding.inquiry.protocol import OutcomeModels
from sounding.learning.protocol import Rejected
from sounding.runtime.following import SeenStamps, follow
from sounding.store.corpus_inquiry import CorpusInquiryLog, ExecutedQuery, Verdict

# Costs are the means over this many recent queries of the collection.
COST_WINDOW = 100
# Until measured: a search's latency, NLI per sentence, sentences a query newly reads.
DEFAULT_SEARCH_MS = 60.0
DEFAULT_NLI_MS_PER_SENTENCE = 8.0
DEFAULT_SENTENCES_PER_QUERY = 20.0
# Steps remembered to recognise one repeated after a crash (a bounded memory).
RECENT_STEPS = 100_000
# A strategy's table starts from the collection's, worth this many outcomes per verdict.
STRATEGY_PRIOR_WEIGHT = 10.0


@dataclass
class _Collection:
    reach: ReachModel = field(default_factory=prior_reach_model)
    counts: np.ndarray = field(default_factory=lambda: np.zeros((len(OUTCOMES), len(VERDICTS))))
    strategy_counts: dict[str, np.ndarray] = field(default_factory=dict)
    sessions: int = 0
    search_ms: deque = field(default_factory=lambda: deque(maxlen=COST_WINDOW))
    nli_ms: deque = field(default_factory=lambda: deque(maxlen=COST_WINDOW))
    sentences: deque = field(default_factory=lambda: deque(maxlen=COST_WINDOW))

    def learn(self, query: ExecutedQuery) -> None:
        if query.feature_set == FEATURE_SET:
            self.reach.update(query.features, float(query.reached))
        self.search_ms.append(query.search_ms)
        if query.reached:
            self.sentences.append(query.nli_pairs)
        if query.nli_pairs:
            self.nli_ms.append(query.nli_ms / query.nli_pairs)

    def models(self) -> OutcomeModels:
        sensor = SensorModel.fit(self.counts, sessions=self.sessions)
        strategy_sensors = {
            strategy: SensorModel.fit(counts, sensor.table, STRATEGY_PRIOR_WEIGHT, self.sessions)
            for strategy, counts in self.strategy_counts.items()
        }
        return OutcomeModels(
            reach=ReachModel.from_dict(self.reach.to_dict()),
            sensor=sensor,
            search_ms=float(np.mean(self.search_ms)) if self.search_ms else DEFAULT_SEARCH_MS,
            nli_ms_per_sentence=float(np.mean(self.nli_ms)) if self.nli_ms else DEFAULT_NLI_MS_PER_SENTENCE,
            sentences_per_query=float(np.mean(self.sentences))
            if self.sentences
            else DEFAULT_SENTENCES_PER_QUERY,
            strategy_sensors=strategy_sensors,
        )


@dataclass(frozen=True)
class CorpusInquiryMetrics:
    queries: int
    observed_sessions: int
    prediction: PredictionMetrics
    # Mean absolute error of the predicted reach (the chance of reaching unread text).
    reach_mae: float
    # {strategy: [executed, mean actual gain in bits]}
    strategies: dict[str, tuple[int, float]]


class CorpusInquiryLearning:
    """One tenant's."""

    def __init__(self, log: CorpusInquiryLog):
        self._log = log
        self._collections: dict[str, _Collection] = {}
        self._predictions = OutcomeLearner()
        self._reach_error_sum = 0.0
        self._queries = 0
        # {strategy: [executed, summed actual gain]}
        self._strategies: dict[str, list[float]] = {}
        self._observed = 0
        self._lock = asyncio.Lock()
        # The latest steps learned from, (session, turn): a repeated step is not learned from twice.
        self._recent: OrderedDict[tuple[str, int], None] = OrderedDict()
        # What the log held when last read, and the rows taken in by their keys.
        self._versions: tuple[int, int] | None = None
        self._seen_queries: SeenStamps[tuple[str, int]] = SeenStamps()
        self._seen_verdicts: SeenStamps[str] = SeenStamps()
        self._following: asyncio.Task | None = None

    @classmethod
    async def open(cls, log: CorpusInquiryLog) -> CorpusInquiryLearning:
        """Rebuilt from the log (replayed on a worker thread: a log holds every query run)."""
        learning = cls(log)
        learning._versions = await log.versions()
        stamped = await log.queries_since(0)
        verdicts = await log.verdicts()

        def replay() -> None:
            by_session: dict[str, list[ExecutedQuery]] = {}
            for query in first_of_each_turn([q for q, _ in stamped]):
                learning._learn(query)
                by_session.setdefault(query.session_id, []).append(query)
            for verdict, _ in verdicts:
                learning._count(verdict, by_session.get(verdict.session_id, []))

        await asyncio.to_thread(replay)
        learning._seen_queries.add(((q.session_id, q.turn), stamp) for q, stamp in stamped)
        learning._seen_verdicts.add((v.session_id, stamp) for v, stamp in verdicts)
        return learning

    def follow_log(self, interval_s: float) -> None:
        """Catch up with the log every `interval_s` from now until `close`."""
        self._following = asyncio.get_running_loop().create_task(
            follow(self.catch_up, interval_s, "the corpus inquiry log")
        )

    async def catch_up(self) -> None:
        """Learn from the queries and verdicts other processes logged since the last look;
        nothing is read while neither table moved."""
        versions = await self._log.versions()
        if versions == self._versions:
            return
        async with self._lock:
            self._versions = versions
            for query, stamp in await self._log.queries_since(self._seen_queries.since_us):
                key = (query.session_id, query.turn)
                if key not in self._seen_queries:
                    self._learn_once(query)
                    self._seen_queries.add([(key, stamp)])
            for verdict, stamp in await self._log.verdicts(self._seen_verdicts.since_us):
                if verdict.session_id not in self._seen_verdicts:
                    self._seen_verdicts.add([(verdict.session_id, stamp)])
                    self._count(verdict, first_of_each_turn(await self._log.queries([verdict.session_id])))

    async def close(self) -> None:
        if self._following is not None:
            self._following.cancel()

    def _collection(self, collection: str) -> _Collection:
        return self._collections.setdefault(collection, _Collection())

    def _learn(self, query: ExecutedQuery) -> None:
        self._collection(query.collection).learn(query)
        self._predictions.record(
            query.predicted_gain,
            query.actual_gain,
            query.predicted_cost_ms,
            query.cost_ms,
            "reached" if query.predicted_reach >= 0.5 else "nothing new",
            "reached" if query.reached else "nothing new",
        )
        self._reach_error_sum += abs(query.predicted_reach - float(query.reached))
        self._queries += 1
        totals = self._strategies.setdefault(query.strategy, [0, 0.0])
        totals[0] += 1
        totals[1] += query.actual_gain

    def _count(self, verdict: Verdict, queries: list[ExecutedQuery]) -> None:
        state = self._collection(verdict.collection)
        reached = [q for q in queries if q.reached and q.outcome]
        column = VERDICTS.index(verdict.verdict)
        for strategy in {q.strategy for q in reached}:  # the pooled counts are the strategies' sum
            own = [q for q in reached if q.strategy == strategy]
            counts = sensor_counts([q.outcome for q in own], [q.found_before for q in own], column)
            state.strategy_counts[strategy] = state.strategy_counts.get(strategy, 0.0) + counts
            state.counts += counts
        state.sessions += 1
        self._observed += 1

    def models(self, collection: str) -> OutcomeModels:
        return self._collection(collection).models()

    async def record(self, query: ExecutedQuery) -> None:
        """Learn from the query now; log it (a restart replays the log). A step repeated after a
        crash records its query again: learned from once, here and on replay."""
        self._learn_once(query)
        await self._log.append_query(query)

    def _learn_once(self, query: ExecutedQuery) -> None:
        key = (query.session_id, query.turn)
        if key not in self._recent:
            self._learn(query)
            self._recent[key] = None
            while len(self._recent) > RECENT_STEPS:
                self._recent.popitem(last=False)

    async def observe(self, session_id: str, collection: str, verdict: str) -> Rejected | None:
        """Fit the collection's sensor table with the session's outcomes under its verdict
        (durable when this returns), or why not."""
        if verdict not in VERDICTS:
            return Rejected(
                0, "INVALID_ARGUMENT", f"a corpus session's ground_truth is one of {', '.join(VERDICTS)}"
            )
        async with self._lock:
            if await self._log.observed(session_id):
                return Rejected(0, "ALREADY_EXISTS", f"session {session_id[:64]!r} was already observed")
            record = Verdict(session_id, collection, verdict)
            self._seen_verdicts.add([(session_id, await self._log.append_verdict(record))])
            self._count(record, first_of_each_turn(await self._log.queries([session_id])))
        return None

    def metrics(self) -> CorpusInquiryMetrics:
        return CorpusInquiryMetrics(
            queries=self._queries,
            observed_sessions=self._observed,
            prediction=self._predictions.metrics(),
            reach_mae=self._reach_error_sum / self._queries if self._queries else 0.0,
            strategies={s: (int(n), total / n) for s, (n, total) in sorted(self._strategies.items())},
        )


def first_of_each_turn(queries: list[ExecutedQuery]) -> list[ExecutedQuery]:
    """The log's queries with a step repeated after a crash counted once (its first row)."""
    seen: set[tuple[str, int]] = set()
    kept = []
    for query in queries:
        if (query.session_id, query.turn) not in seen:
            seen.add((query.session_id, query.turn))
            kept.append(query)
    return kept
