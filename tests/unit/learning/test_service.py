import asyncio
from dataclasses import replace
from unittest.mock import AsyncMock

import numpy as np
import pytest
from sounding.core import plans
from sounding.core.expansion_gate import ExpansionStep
from sounding.learning import features
from sounding.learning.outcomes import plan_inputs, rewards
from sounding.learning.protocol import RetrievalOutcome
from sounding.learning.service import LearningConfig, LearningService
from sounding.store.learning import RetrievalRecord

pytestmark = pytest.mark.unit
ARMS = ("dense", "lexical")


class MemoryLog:
    """The LearningLog contract in memory; `fail_observations` and `fail_retrievals` make the
    appends fail; with `hold_appends` an observation append sets `appending` and waits for
    `release`."""

    def __init__(self):
        self.retrieval_rows: dict[str, RetrievalRecord] = {}
        self.observation_rows: list = []
        self.fail_observations = False
        self.fail_retrievals = False
        self.hold_appends = False
        self.appending, self.release = asyncio.Event(), asyncio.Event()
        self.observed_asked: list[set[str]] = []
        self.stamp = 0

    async def append_retrievals(self, records):
        if self.fail_retrievals:
            raise OSError("disk full")
        self.retrieval_rows.update({r.retrieval_id: r for r in records})

    async def observed_retrievals(self, ids):
        self.observed_asked.append(set(ids))
        return {o.retrieval_id for o in self.observation_rows} & set(ids)

    async def retrievals(self, ids):
        return {i: self.retrieval_rows[i] for i in set(ids) if i in self.retrieval_rows}

    async def next_query_index(self):
        return max((r.query_index for r in self.retrieval_rows.values()), default=-1) + 1

    async def append_observations(self, records):
        if self.fail_observations:
            raise OSError("disk full")
        if self.hold_appends:
            self.appending.set()
            await self.release.wait()
        self.stamp += 1
        self.observation_rows.extend(replace(r, create_time_us=self.stamp) for r in records)
        return self.stamp

    async def observations(self, since_us=None):
        return [o for o in self.observation_rows if since_us is None or o.create_time_us >= since_us]

    async def versions(self):
        return (len(self.observation_rows), 0, 0)

    async def latest_deployment(self):
        return None

    async def latest_calibration(self, target):
        return None

    async def calibrations_with_prefix(self, prefix):
        return {}


def record(retrieval_id: str, dense_found=("d1", "d2"), lexical_found=("d3",), index=0) -> RetrievalRecord:
    context = np.zeros(features.DIMENSION)
    context[0] = 1.0
    return RetrievalRecord(
        retrieval_id=retrieval_id,
        collection="c",
        query_index=index,
        mode="cold_start",
        context=context.tolist(),
        embedding=[1.0, 0.0],
        arms={
            "dense": {
                "document_ids": list(dense_found),
                "latency_ms": 0.0,
                "cost_ms": 0.0,
                "exploration": False,
            },
            "lexical": {
                "document_ids": list(lexical_found),
                "latency_ms": 1000.0,
                "cost_ms": 1000.0,
                "exploration": False,
            },
        },
    )


def service(log: MemoryLog) -> LearningService:
    return LearningService(log, LearningConfig(ARMS))


def test_rewards_credit_each_arm_for_what_it_contributed():
    outcome = RetrievalOutcome("r1", used_document_ids=("d1", "d3"), feedback="helpful")
    # dense found d1 of the two used: 0.5 + 0.3; lexical found d3: 0.5 + 0.3 − 1000/5000.
    assert rewards(record("r1"), outcome) == pytest.approx({"dense": 0.8, "lexical": 0.6})


def test_the_latency_penalty_is_charged_on_cost_so_a_cached_generation_is_not_cheap():
    cached = record("r1")
    cached.arms["dense"].update(latency_ms=40.0, cost_ms=9000.0)
    outcome = RetrievalOutcome("r1", used_document_ids=("d1", "d3"))
    # dense: 0.5 − min(9000/5000, 0.2); its 40 ms latency would have cost only 0.008.
    assert rewards(cached, outcome)["dense"] == pytest.approx(0.3)


def test_the_selector_learns_every_plan_of_the_arms_that_ran_from_its_fused_ranking():
    log = MemoryLog()

    async def run():
        learning = service(log)
        learning.remember(record("r1", dense_found=("d1", "d2"), lexical_found=("d3",)))
        await learning.observe([RetrievalOutcome("r1", ("d1",), missed_document_ids=("d3",))])
        return learning

    learning = asyncio.run(run())
    scores = learning.selector.bandit.scores(np.array(log.retrieval_rows["r1"].context))
    # Needed d1 and d3 (ideal DCG 1 + 1/log2 3). dense ranks d1 first; lexical d3 first, at 1 s
    # (penalty 0.2); fused, d1 and d3 tie at 1/61 and lead. One update with context e1 and
    # A = I + e1e1ᵀ predicts half the reward.
    ideal = 1 + 1 / np.log2(3)
    assert scores["dense"].mean == pytest.approx(0.5 / ideal)
    assert scores["lexical"].mean == pytest.approx(0.5 * (1 / ideal - 0.2))
    assert scores["dense+lexical"].mean == pytest.approx(0.5 * (1 - 0.2))


def test_plans_of_a_retrieval_fused_by_min_max_are_rewarded_on_its_logged_scores():
    # RRF ranks d1 first (second in dense, third in lexical) and the needed d3 third; min-max
    # ranks d2 and d3 first (each its arm's top, d2 by id) and d1 third (0.999 + 0), so d3 second.
    scored = replace(
        record("r1", dense_found=("d2", "d1", "d4"), lexical_found=("d3", "d5", "d1")),
        arm_scores={"dense": [10.0, 9.99, 0.0], "lexical": [3.0, 2.0, 0.0]},
    )
    rankings = {arm: ran["document_ids"] for arm, ran in scored.arms.items()}
    costs = {"dense": 0.0, "lexical": 1000.0}

    def learned(fusion: str) -> dict[str, float]:
        log = MemoryLog()

        async def run():
            learning = service(log)
            learning.remember(replace(scored, fusion=fusion))
            await learning.observe([RetrievalOutcome("r1", ("d3",))])

        asyncio.run(run())
        return log.observation_rows[0].plan_rewards

    by_scores, by_ranks = learned("min_max"), learned("rrf")
    expected_by_scores = plans.plan_rewards(rankings, costs, {"d3"}, "", scores=scored.arm_scores)
    assert by_scores == pytest.approx(expected_by_scores)
    assert by_ranks == pytest.approx(plans.plan_rewards(rankings, costs, {"d3"}, ""))
    assert by_scores["dense+lexical"] == pytest.approx(1 / np.log2(3) - 0.2)
    assert by_ranks["dense+lexical"] == pytest.approx(0.5 - 0.2)
    # Read back from the log (no fused tops kept), the same rewards.
    logged = {"used_document_ids": ["d3"], "feedback": ""}
    assert plans.plan_rewards_many([plan_inputs(replace(scored, fusion="min_max"), logged)])[
        0
    ] == pytest.approx(expected_by_scores)


def test_an_unknown_retrieval_is_reported_and_the_others_are_recorded():
    log = MemoryLog()

    async def run():
        learning = service(log)
        learning.remember(record("r1"))
        learning.remember(record("r2", index=1))
        return await learning.observe(
            [
                RetrievalOutcome("r1", ("d1",)),
                RetrievalOutcome("nope", ("d1",)),
                RetrievalOutcome("", ("d1",)),
                RetrievalOutcome("r2", ("d3",), feedback="bogus"),
                RetrievalOutcome("r2", ("d3",)),
                RetrievalOutcome("r1", ("d2",)),
            ]
        )

    result = asyncio.run(run())
    assert result.recorded == 2
    assert [(r.index, r.code) for r in result.rejected] == [
        (1, "NOT_FOUND"),
        (2, "INVALID_ARGUMENT"),
        (3, "INVALID_ARGUMENT"),
        (5, "ALREADY_EXISTS"),
    ]
    assert [o.retrieval_id for o in log.observation_rows] == ["r1", "r2"]
    assert [o.sequence for o in log.observation_rows] == [0, 1]
    assert set(log.retrieval_rows) == {"r1", "r2"}  # written before the observations


def test_a_second_outcome_is_refused_from_memory_once_seen_here_and_from_the_log_otherwise():
    log = MemoryLog()

    async def run():
        learning = service(log)
        learning.remember(record("r1"))
        learning.remember(record("r2", index=1))
        await learning.observe([RetrievalOutcome("r1", ("d1",))])
        again = await learning.observe([RetrievalOutcome("r1", ("d1",)), RetrievalOutcome("r2", ("d3",))])
        asked_while_recent = list(log.observed_asked)
        restarted = await LearningService.restore(log, LearningConfig(ARMS))
        after_restart = await restarted.observe([RetrievalOutcome("r1", ("d1",))])
        return again, asked_while_recent, after_restart

    again, asked_while_recent, after_restart = asyncio.run(run())
    assert again.recorded == 1 and [(r.index, r.code) for r in again.rejected] == [(0, "ALREADY_EXISTS")]
    # Not yet seen observed here: another orchestrator may have recorded one, so the log is asked.
    assert asked_while_recent == [{"r1"}, {"r2"}]
    assert [r.code for r in after_restart.rejected] == ["ALREADY_EXISTS"]
    assert log.observed_asked == [{"r1"}, {"r2"}, {"r1"}]


def test_a_failed_append_teaches_nothing_and_the_outcome_is_accepted_when_sent_again():
    log = MemoryLog()
    log.fail_observations = True

    async def run():
        learning = service(log)
        learning.remember(record("r1"))
        with pytest.raises(OSError):
            await learning.observe([RetrievalOutcome("r1", ("d1",))])
        untaught = set(learning.selector.bandit.pulls.values())
        log.fail_observations = False
        return untaught, await learning.observe([RetrievalOutcome("r1", ("d1",))])

    untaught, result = asyncio.run(run())
    assert untaught == {0}
    assert result.recorded == 1 and not result.rejected
    assert [o.retrieval_id for o in log.observation_rows] == ["r1"]


def test_outcomes_for_a_retrieval_whose_log_write_failed_are_refused_until_it_is_written():
    log = MemoryLog()
    log.fail_retrievals = True

    async def run():
        learning = service(log)
        learning.remember(record("r1"))
        refused = await learning.observe([RetrievalOutcome("r1", ("d1",))])
        log.fail_retrievals = False  # the disk has room again: the next write retries r1
        accepted = await learning.observe([RetrievalOutcome("r1", ("d1",))])
        return refused, accepted

    refused, accepted = asyncio.run(run())
    assert refused.recorded == 0 and [(r.index, r.code) for r in refused.rejected] == [(0, "UNAVAILABLE")]
    assert accepted.recorded == 1 and not accepted.rejected
    assert [o.retrieval_id for o in log.observation_rows] == ["r1"] and "r1" in log.retrieval_rows


def test_a_cancelled_observe_still_commits_and_learns_together():
    log = MemoryLog()
    log.hold_appends = True

    async def run():
        learning = service(log)
        learning.remember(record("r1"))
        task = asyncio.ensure_future(learning.observe([RetrievalOutcome("r1", ("d1",))]))
        await log.appending.wait()  # inside the append
        task.cancel()
        again = asyncio.ensure_future(learning.observe([RetrievalOutcome("r1", ("d1",))]))  # meanwhile
        await asyncio.sleep(0)
        log.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return learning, await again

    learning, again = asyncio.run(run())
    assert [o.sequence for o in log.observation_rows] == [0]
    # Learnt once, about every plan of the two arms.
    assert learning._sequence == 1 and learning.selector.bandit.pulls == dict.fromkeys(
        ("dense", "lexical", "dense+lexical"), 1
    )
    assert [r.code for r in again.rejected] == ["ALREADY_EXISTS"]


def test_replaying_the_log_rebuilds_the_same_selector():
    log = MemoryLog()

    async def run():
        learning = service(log)
        for i in range(30):
            learning.remember(record(f"r{i}", index=i, dense_found=("d1",) if i % 3 else ("d9",)))
        await learning.observe([RetrievalOutcome(f"r{i}", ("d1", "d3")) for i in range(30)])
        context = np.array(log.retrieval_rows["r0"].context)
        before = learning.selector.bandit.scores(context)
        replayed = await LearningService.restore(log, LearningConfig(ARMS))
        return before, replayed.selector.bandit.scores(context), replayed

    before, after, replayed = asyncio.run(run())
    assert after == before
    assert replayed.selector.queries_planned == 30
    assert replayed._sequence == 30


def test_replay_learns_the_logged_plan_rewards_and_computes_those_of_older_rows():
    log = MemoryLog()

    async def run():
        learning = service(log)
        for i in range(20):
            learning.remember(record(f"r{i}", index=i, dense_found=("d1",) if i % 3 else ("d9",)))
        await learning.observe([RetrievalOutcome(f"r{i}", ("d1", "d3")) for i in range(20)])
        logged = [set(o.plan_rewards) for o in log.observation_rows]
        context = np.array(log.retrieval_rows["r0"].context)
        learned = learning.selector.bandit.scores(context)
        # Rows logged before plan rewards were kept: computed again, to the same selector.
        log.observation_rows[::2] = [replace(o, plan_rewards=None) for o in log.observation_rows[::2]]
        recomputed = await replayed_scores(log, context)
        # Logged rewards are what the replay learns, not a recomputation.
        log.observation_rows[:] = [
            replace(o, plan_rewards=dict.fromkeys(logged[0], 0.0)) for o in log.observation_rows
        ]
        zeroed = await replayed_scores(log, context)
        return logged, learned, recomputed, zeroed

    logged, learned, recomputed, zeroed = asyncio.run(run())
    assert all(plans == {"dense", "lexical", "dense+lexical"} for plans in logged)
    assert recomputed == learned
    assert all(zeroed[plan].mean == 0.0 for plan in logged[0]) and zeroed != learned


async def replayed_scores(log, context):
    return (await LearningService.restore(log, LearningConfig(ARMS))).selector.bandit.scores(context)


def test_observed_expansion_steps_teach_the_gate_and_a_replay_teaches_it_the_same():
    log = MemoryLog()

    async def run():
        learning = service(log)
        for i in range(6):
            steps = (ExpansionStep("synonym", ("d5",), 80.0), ExpansionStep("hyponym", ("d6",), 120.0))
            learning.remember(replace(record(f"r{i}", index=i), expansions=steps))
        await learning.observe([RetrievalOutcome(f"r{i}", ("d1", "d5")) for i in range(6)])
        replayed = await LearningService.restore(log, LearningConfig(ARMS))
        return learning, replayed

    learning, replayed = asyncio.run(run())
    assert learning.expansion_gate.posterior("c", "synonym") == (1.0 + 6, 19.0)
    assert learning.expansion_gate.posterior("c", "hyponym") == (1.0, 19.0 + 6)
    assert replayed.expansion_gate.posterior("c", "synonym") == (1.0 + 6, 19.0)
    assert replayed.expansion_gate.posterior("c", "hyponym") == (1.0, 19.0 + 6)
    # remembered retrievals measure each step's latency and each arm's cost
    assert learning.expansion_gate.expected_step_ms("synonym") == pytest.approx(80.0)
    assert learning.selector.costs.get("lexical") == pytest.approx(1000.0)


def test_a_written_retrieval_is_rewarded_from_its_fused_rankings_without_ranking_again(monkeypatch):
    log = MemoryLog()
    ranked: list[int] = []
    original = plans.fused_tops

    def counted(rankings, *args, **kwargs):
        ranked.append(len(rankings))
        return original(rankings, *args, **kwargs)

    monkeypatch.setattr(plans, "fused_tops", counted)

    async def run():
        learning = service(log)
        learning.remember(record("r1"))
        unwritten = learning.remembered.tops("r1")
        await learning.remembered.wait_written()
        tops = learning.remembered.tops("r1")
        await learning.observe([RetrievalOutcome("r1", ("d1",), missed_document_ids=("d3",))])
        return unwritten, tops

    unwritten, tops = asyncio.run(run())
    assert unwritten is None and tops is not None and tops.documents == ["d1", "d2", "d3"]
    assert sum(ranked) == 0  # the outcome's plans were rewarded from the remembered tops
    expected = plans.plan_rewards(
        {"dense": ["d1", "d2"], "lexical": ["d3"]}, {"dense": 0.0, "lexical": 1000.0}, {"d1", "d3"}, ""
    )
    assert log.observation_rows[0].plan_rewards == pytest.approx(expected)


def test_another_orchestrators_observations_reach_this_selector_once_when_it_catches_up():
    log = MemoryLog()  # the store both orchestrators share

    async def run():
        here, there = service(log), service(log)
        for learning in (here, there):
            learning.remember(record("r1", dense_found=("d1", "d2"), lexical_found=("d3",)))
        await there.observe([RetrievalOutcome("r1", ("d1",), missed_document_ids=("d3",))])
        context = np.array(log.retrieval_rows["r1"].context)
        before = here.selector.bandit.scores(context)
        await here.catch_up()
        caught_up = here.selector.bandit.scores(context)
        await here.catch_up()
        await there.catch_up()  # its own observation: not learned twice
        again = await here.observe([RetrievalOutcome("r1", ("d2",))])
        return (
            before,
            caught_up,
            here.selector.bandit.scores(context),
            there.selector.bandit.scores(context),
            again,
        )

    before, caught_up, after_twice, theirs, again = asyncio.run(run())
    assert caught_up["dense"].mean != pytest.approx(before["dense"].mean)
    for arm in theirs:
        assert caught_up[arm].mean == pytest.approx(theirs[arm].mean)
        assert after_twice[arm].mean == pytest.approx(caught_up[arm].mean)
    assert [r.code for r in again.rejected] == ["ALREADY_EXISTS"]


def test_an_outcome_of_a_retrieval_another_orchestrator_ran_is_read_from_the_log_once():
    log = MemoryLog()

    async def run():
        here, there = service(log), service(log)
        for learning in (here, there):
            learning.remembered.flush_interval_s = 0.01
        there.remember(record("r1"))
        await there.remembered.wait_written()
        log.retrievals = AsyncMock(side_effect=log.retrievals)  # counts the log's lookups
        recorded = await here.observe([RetrievalOutcome("r1", ("d1",))])
        lookups = log.retrievals.await_count
        unknown = await here.observe([RetrievalOutcome("r9", ("d1",))])  # logged by no one
        return recorded, lookups, unknown

    recorded, lookups, unknown = asyncio.run(run())
    assert recorded.recorded == 1 and lookups == 1
    assert [r.code for r in unknown.rejected] == ["NOT_FOUND"]
