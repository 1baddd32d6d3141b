"""The corpus inquiry learner over an in-memory log: the outcome model learns from every query,
a verdict fits the sensor table from its session's outcomes, costs are measured, and a restart
rebuilds the same state from the log."""

import asyncio

import numpy as np
import pytest
from sounding.core.claim_evidence import CONTRADICT, CONTRADICTING, DEFAULT_SENSOR, NOTHING, SUPPORT
from sounding.core.query_scoring import FEATURE_SET, REACH_FEATURES, features
from sounding.learning.corpus_inquiry import STRATEGY_PRIOR_WEIGHT, CorpusInquiryLearning
from sounding.store.corpus_inquiry import ExecutedQuery, Verdict

pytestmark = pytest.mark.unit


class MemoryLog:
    """The log's calls in memory, stamped by a counter."""

    def __init__(self):
        self.rows: list[tuple[ExecutedQuery, int]] = []
        self.verdict_rows: list[tuple[Verdict, int]] = []
        self.clock = 0

    def stamp(self) -> int:
        self.clock += 1
        return self.clock

    async def versions(self):
        return len(self.rows), len(self.verdict_rows)

    async def append_query(self, query):
        self.rows.append((query, self.stamp()))

    async def queries(self, session_ids=None):
        return [q for q, _ in self.rows if session_ids is None or q.session_id in session_ids]

    async def queries_since(self, since_us):
        return [(q, stamp) for q, stamp in self.rows if stamp >= since_us]

    async def append_verdict(self, verdict):
        self.verdict_rows.append((verdict, self.stamp()))
        return self.clock

    async def verdicts(self, since_us=0):
        return [(v, stamp) for v, stamp in self.verdict_rows if stamp >= since_us]

    async def observed(self, session_id):
        return any(v.session_id == session_id for v, _ in self.verdict_rows)


def query(
    session,
    reached,
    outcome=(),
    predicted_reach=0.5,
    strategy="confirmation",
    gain=0.1,
    similarity=0.2,
    turn=1,
):
    return ExecutedQuery(
        session_id=session,
        collection="papers",
        turn=turn,
        strategy=strategy,
        features=features(strategy, 0.8, similarity, similarity, 0.0, False, False),
        feature_set=FEATURE_SET,
        predicted_reach=predicted_reach,
        reached=reached,
        predicted_gain=0.2,
        actual_gain=gain,
        predicted_cost_ms=100.0,
        cost_ms=80.0,
        outcome=list(outcome),
        found_before=[0.0, 0.0],
        search_ms=40.0,
        nli_ms=40.0 if reached else 0.0,
        nli_pairs=10 if reached else 0,
    )


def test_the_learner_learns_reach_fits_the_sensor_and_survives_a_restart():
    log = MemoryLog()
    learning = asyncio.run(CorpusInquiryLearning.open(log))
    fresh = learning.models("papers")
    assert np.array_equal(fresh.sensor.table, DEFAULT_SENSOR) and fresh.sensor.sessions == 0
    redundant = features("refutation", 0.8, 0.95, 0.95, 0.0, False, False)
    before = fresh.reach.predict(redundant)[0]

    async def teach():
        for turn in range(1, 21):  # near-repeats never reach anything new
            await learning.record(
                query("s1", False, similarity=0.95, strategy="refutation", gain=0.0, turn=turn)
            )
        await learning.record(query("s1", True, (0.7, 0.1, 0.2), turn=21))
        await learning.record(query("s1", True, (0.1, 0.1, 0.8), turn=22))
        return await learning.observe("s1", "papers", "SUPPORT")

    assert asyncio.run(teach()) is None
    models = learning.models("papers")
    assert models.reach.predict(redundant)[0] < before
    assert models.sensor.sessions == 1
    # SUPPORT's column: (0.7 + 0.1, 0.1 + 0.1, 0.2 + 0.8) + 10 × the prior's, normalised.
    support = np.array([0.8, 0.2, 1.0]) + 10 * DEFAULT_SENSOR[:, SUPPORT]
    assert models.sensor.table[:, SUPPORT] == pytest.approx(support / support.sum())
    assert models.sensor.table[:, CONTRADICT] == pytest.approx(DEFAULT_SENSOR[:, CONTRADICT])
    assert models.search_ms == pytest.approx(40.0)
    assert models.nli_ms_per_sentence == pytest.approx(4.0) and models.sentences_per_query == 10
    again = asyncio.run(learning.observe("s1", "papers", "SUPPORT"))
    assert again is not None and again.code == "ALREADY_EXISTS"
    wrong = asyncio.run(learning.observe("s2", "papers", "MAYBE"))
    assert wrong is not None and wrong.code == "INVALID_ARGUMENT"

    metrics = learning.metrics()
    assert metrics.queries == 22 and metrics.observed_sessions == 1
    assert metrics.strategies["refutation"] == (20, 0.0)
    assert metrics.prediction.information_gain_mae == pytest.approx((20 * 0.2 + 2 * 0.1) / 22)
    assert metrics.reach_mae == pytest.approx(0.5)

    restarted = asyncio.run(CorpusInquiryLearning.open(log))
    replayed = restarted.models("papers")
    assert replayed.reach.mean == pytest.approx(models.reach.mean)
    assert replayed.sensor.table == pytest.approx(models.sensor.table)
    assert restarted.metrics().queries == 22


def test_a_step_repeated_after_a_crash_is_learned_from_once_and_other_feature_sets_are_not_replayed():
    log = MemoryLog()
    learning = asyncio.run(CorpusInquiryLearning.open(log))
    once = query("s1", True, (0.2, 0.1, 0.7))
    asyncio.run(learning.record(once))
    asyncio.run(learning.record(once))  # the same session and turn again
    assert learning.metrics().queries == 1 and len(log.rows) == 2
    stale = ExecutedQuery(
        **{**once.__dict__, "session_id": "old", "features": [1.0, 0.5], "feature_set": "older"}
    )
    log.rows.append((stale, log.stamp()))
    restarted = asyncio.run(CorpusInquiryLearning.open(log))
    assert restarted.metrics().queries == 2  # the stale row counts in the metrics, not in the model
    assert restarted.models("papers").reach.mean == pytest.approx(learning.models("papers").reach.mean)


def test_the_reach_features_name_every_input():
    named = dict(zip(REACH_FEATURES, features("aspect", 0.5, 0.1, 0.2, 0.3, False, True), strict=True))
    assert named["similarity_to_claim"] == 0.5 and named["similarity_to_unread"] == 0.3
    assert named["first_query"] == 1.0 and named["unread_left"] == 0.0 and named["strategy:aspect"] == 1.0
    assert NOTHING == 2


def test_a_learner_follows_what_another_on_the_same_log_records_and_observes_once_each():
    log = MemoryLog()

    async def run():
        here, there = await CorpusInquiryLearning.open(log), await CorpusInquiryLearning.open(log)
        for turn in range(1, 4):
            await here.record(query("s1", True, (0.1, 0.1, 0.8), turn=turn))
        await here.record(query("s1", True, (0.1, 0.1, 0.8), turn=3))  # repeated after a crash
        assert await here.observe("s1", "papers", "SUPPORT") is None
        await there.catch_up()
        await there.catch_up()  # nothing new: nothing learned twice
        await here.catch_up()  # its own rows, already learned from
        return here, there

    here, there = asyncio.run(run())
    assert there.metrics().queries == here.metrics().queries == 3
    assert there.metrics().observed_sessions == here.metrics().observed_sessions == 1
    assert there.models("papers").sensor.table == pytest.approx(here.models("papers").sensor.table)
    assert there.models("papers").reach.mean == pytest.approx(here.models("papers").reach.mean)
    assert there.models("papers").sensor.sessions == 1


def test_each_strategy_gets_its_own_sensor_table_from_what_its_queries_found():
    log = MemoryLog()
    learning = asyncio.run(CorpusInquiryLearning.open(log))

    async def teach():
        # On a CONTRADICT claim, the refutation queries found contradicting text, the
        # confirmation queries nothing.
        for turn in range(1, 7):
            await learning.record(query("s1", True, (0.0, 1.0, 0.0), strategy="refutation", turn=turn))
        for turn in range(7, 13):
            await learning.record(query("s1", True, (0.0, 0.0, 1.0), strategy="confirmation", turn=turn))
        return await learning.observe("s1", "papers", "CONTRADICT")

    assert asyncio.run(teach()) is None
    models = learning.models("papers")
    refuting = models.sensor_for("refutation").table[:, CONTRADICT]
    confirming = models.sensor_for("confirmation").table[:, CONTRADICT]
    pooled = models.sensor.table[:, CONTRADICT]
    # P(contradicting found | CONTRADICT): each strategy's six outcomes on the collection's table
    # (worth 10 per verdict) as their prior.
    expected = (6.0 + STRATEGY_PRIOR_WEIGHT * pooled[CONTRADICTING]) / (6.0 + STRATEGY_PRIOR_WEIGHT)
    assert refuting[CONTRADICTING] == pytest.approx(expected)
    assert refuting[CONTRADICTING] > pooled[CONTRADICTING] > confirming[CONTRADICTING]
    assert models.sensor_for("entity_probe") is models.sensor  # none observed: the collection's
    restarted = asyncio.run(CorpusInquiryLearning.open(log))
    assert restarted.models("papers").sensor_for("refutation").table == pytest.approx(
        models.sensor_for("refutation").table
    )
