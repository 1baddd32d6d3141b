import asyncio
import itertools
import json
import math
import random

import pytest
from sounding.core import dpp
from sounding.inquiry import engine
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.inquiry.llm import selection, tasks
from sounding.inquiry.llm.assessment import SamplingSettings
from sounding.inquiry.protocol import AskEvent, Policy, Start

from .fake_backend import FakeBackend

pytestmark = pytest.mark.unit

SUSPECTS = ("Alice Archer", "Bruno Baker", "Clara Cole")
DC = tasks.Problem(tasks.TASK_SPECS["dc"], "A case.", SUSPECTS)
ASK_ALICE, ASK_BRUNO = "Alice Archer: Where were you?", "Bruno Baker: Did you see it?"


def test_direct_prompting_takes_the_first_valid_candidate_and_falls_back_when_there_is_none():
    backend = FakeBackend(lambda messages, _: "I would ask many things.")
    chosen = asyncio.run(selection.direct_prompting(backend, DC, [], SamplingSettings(), random.Random(0)))
    assert chosen.question.startswith("Alice Archer: ") and chosen.rationale.startswith("fallback")
    good = FakeBackend(lambda messages, _: '[{"suspect": "Clara", "question": "Did you see the knife?"}]')
    chosen = asyncio.run(selection.direct_prompting(good, DC, [], SamplingSettings(), random.Random(0)))
    assert chosen.question == "Clara Cole: Did you see the knife?" and chosen.rationale.startswith("direct")
    assert chosen.scored == []


def decisive_alice():
    """Asking Alice is imagined to get a confession, after which every answer is Clara (robust MI
    0); asking Bruno gets nothing, and the answers keep cycling over the suspects, each revision
    repeating its answer (robust MI stays high)."""
    cycle = itertools.cycle(SUSPECTS)

    def reply(messages, _):
        last = messages[-1]["content"]
        if "JSON list" in last:
            return json.dumps(
                [{"suspect": "Alice Archer", "question": "Where were you?"}]
                + [{"suspect": "Bruno Baker", "question": "Did you see it?"}]
            )
        if "Imagine the other side" in last:
            return "Clara did it." if ASK_ALICE in last else "Nothing."
        if last.startswith("Reconsider"):
            return messages[-2]["content"]
        if "Clara did it." in messages[1]["content"]:
            return json.dumps({"suspect": "Clara Cole"})
        return json.dumps({"suspect": next(cycle)})

    return reply


def test_voi_asks_the_question_whose_imagined_answers_would_settle_the_answer():
    settings = SamplingSettings(samples=4, max_tries=2)
    now = asyncio.run(selection.robust_mi(FakeBackend(decisive_alice()), DC, [], settings, random.Random(0)))
    backend = FakeBackend(decisive_alice())
    chosen = asyncio.run(
        selection.value_of_information(backend, DC, [], settings, random.Random(0), quantile=0.8, cost=0.25)
    )
    assert chosen.question == ASK_ALICE and chosen.rationale.startswith("voi")
    alice, bruno = chosen.scored
    assert alice.outcomes == {"Clara did it.": 1.0} and bruno.outcomes == {"Nothing.": 1.0}
    # After Alice's answer every sample says Clara: robust MI 0, all of today's is gained.
    assert now > 0.5 and (alice.reduction, alice.value) == (pytest.approx(now), pytest.approx(now - 0.25))
    assert bruno.reduction < 0.5 and bruno.value == pytest.approx(bruno.reduction - 0.25)


@pytest.mark.parametrize(
    ("measure", "gained"),
    # Now four samples cycle over three suspects (p_max 1/2, all three in the set at q = 0.8);
    # after Alice's imagined confession every sample is Clara (p_max 1, a set of one).
    [("self_consistency", 0.5), ("set_size", 2.0)],
)
def test_the_ablations_swap_vois_measure(measure, gained):
    settings = SamplingSettings(samples=4, max_tries=2, measure=measure)
    chosen = asyncio.run(
        selection.value_of_information(
            FakeBackend(decisive_alice()), DC, [], settings, random.Random(0), quantile=0.8, cost=0.0
        )
    )
    alice, bruno = chosen.scored
    assert alice.question == ASK_ALICE and alice.reduction == pytest.approx(gained)
    assert bruno.reduction == pytest.approx(0.0)


def test_without_voi_a_random_valid_candidate_is_asked_and_nothing_is_scored():
    settings = SamplingSettings(choice="random")
    asked = set()
    for seed in range(12):
        backend = FakeBackend(decisive_alice())
        chosen = asyncio.run(
            selection.value_of_information(
                backend, DC, [], settings, random.Random(seed), quantile=0.8, cost=0.0
            )
        )
        assert chosen.scored == [] and chosen.rationale.startswith("random")
        assert all("Imagine the other side" not in m[-1]["content"] for m in backend.calls)
        asked.add(chosen.question)
    assert asked == {ASK_ALICE, ASK_BRUNO}


def test_without_dpp_the_slate_is_the_first_candidates_listed():
    listed = [{"suspect": "Alice Archer", "question": f"Question {i}?"} for i in range(dpp.DEFAULT_SLATE + 3)]
    backend = FakeBackend(lambda m, _: json.dumps(listed) if "JSON list" in m[-1]["content"] else "{}")
    settings = SamplingSettings(slate="top", samples=2, max_tries=1)
    chosen = asyncio.run(
        selection.value_of_information(backend, DC, [], settings, random.Random(0), quantile=0.8, cost=0.0)
    )
    assert sorted(c.question for c in chosen.scored) == sorted(
        f"Alice Archer: Question {i}?" for i in range(dpp.DEFAULT_SLATE)
    )


class RephrasingBackend(FakeBackend):
    """`decisive_alice`, listing nine rephrasings of the question to Bruno before the one to
    Alice; a rephrasing embeds as its question does (questions to one suspect, one vector)."""

    def __init__(self):
        reply = decisive_alice()
        rephrased = [{"suspect": "Bruno Baker", "question": f"Did you see it, {n}?"} for n in range(9)]
        listed = json.dumps([*rephrased, {"suspect": "Alice Archer", "question": "Where were you?"}])
        super().__init__(
            lambda messages, n: listed if "JSON list" in messages[-1]["content"] else reply(messages, n)
        )

    async def embed(self, texts):
        return await super().embed([text.split(":")[0] for text in texts])


def test_the_dpp_slate_keeps_one_of_many_rephrasings_and_the_distinct_question_listed_after_them():
    settings = SamplingSettings(samples=4, max_tries=2)
    chosen = asyncio.run(
        selection.value_of_information(
            RephrasingBackend(), DC, [], settings, random.Random(0), quantile=0.8, cost=0.0
        )
    )
    # The rephrasings add no volume after the first: the slate is it and Alice's question, listed
    # tenth, past a slate of the first eight; of the two, Alice's settles the answer.
    assert sorted(c.question for c in chosen.scored) == [ASK_ALICE, "Bruno Baker: Did you see it, 0?"]
    assert chosen.question == ASK_ALICE


def test_imagined_outcomes_are_canonical_and_unparsed_ones_left_out():
    gn = tasks.Problem(tasks.TASK_SPECS["gn"], "")
    replies = itertools.cycle(["1A2B", "1 bull and 2 cows", "no idea", "0A0B"])
    backend = FakeBackend(lambda messages, _: next(replies))
    outcomes = asyncio.run(selection.imagined_outcomes(backend, gn, [], "1234", SamplingSettings()))
    assert outcomes == {
        bc.feedback_sentence(1, 2): pytest.approx(4 / 6),
        bc.feedback_sentence(0, 0): pytest.approx(2 / 6),
    }


def test_a_simulated_gn_ask_carries_its_voi_and_the_candidates_it_beat():
    start = Start(
        "llm",
        Policy(question_selection="voi", stop_rule="robust_mi_risk", max_turns=3, seed=2),
        {"task": "gn", "policy_model": "simulated"},
    )
    session = engine.start(start)
    # Eight secrets are left (4567, 4569, 4578, ...): robust MI is below its ln 4 ceiling, and a
    # guess's imagined feedback narrows them further.
    turns = [("0123", bc.feedback_sentence(0, 0)), ("4568", bc.feedback_sentence(3, 0))]
    session.domain_state["turns"] = [list(t) for t in turns]
    session.live = None  # the domain is rebuilt from the state set here
    ask = asyncio.run(engine.advance(session))[-1]
    assert isinstance(ask, AskEvent) and ask.rationale.startswith("voi")
    scores = [ask.chosen.cost_adjusted_score] + [q.cost_adjusted_score for q in ask.runners_up]
    assert len(ask.runners_up) == 4 and scores == sorted(scores, reverse=True)
    assert {ask.chosen.question, *(q.question for q in ask.runners_up)} <= set(
        tasks.consistent_guesses(turns)
    )
    assert ask.chosen.expected_information_gain > 0
    assert ask.chosen.question in selection.tasks.unasked([ask.chosen.question], turns)


def test_cip_full_asks_the_question_whose_imagined_answers_leave_the_smallest_set():
    backend = FakeBackend(decisive_alice())
    settings = SamplingSettings(samples=4, max_tries=2)
    # Quantile 0.8: a suspect named by at least one in five samples is in the set.
    chosen = asyncio.run(
        selection.smallest_expected_set(backend, DC, [], settings, random.Random(0), quantile=0.8, cost=0.0)
    )
    assert chosen.question == ASK_ALICE and chosen.rationale.startswith("cip_full")
    alice, bruno = chosen.scored
    # Now the four samples cycle over three suspects: all three are in the set. After Alice's
    # imagined confession only Clara is; after Bruno's nothing changes.
    assert (alice.reduction, bruno.reduction) == (pytest.approx(2.0), pytest.approx(0.0))


def test_after_a_voi_question_the_belief_reports_how_the_real_answer_compares_with_the_imagined_ones():
    start = Start(
        "llm",
        Policy(question_selection="voi", stop_rule="robust_mi_risk", max_turns=3, seed=4),
        {"task": "gn", "policy_model": "simulated"},
    )
    session = engine.start(start)
    first = asyncio.run(engine.advance(session))
    assert "prompt_sensitivity" in first[0].homogeneity and "simulator_surprise" not in first[0].homogeneity
    ask = first[-1]
    guess, secret = ask.chosen.question, "8402"
    code = int(bc.feedback_table().table[bc.feedback_table().index[guess], bc.feedback_table().index[secret]])
    events = asyncio.run(
        engine.observe(session, ask.chosen.question_id, bc.feedback_sentence(*divmod(code, 5)))
    )
    after = events[0].homogeneity
    assert after["simulator_surprise"] >= 0 and isinstance(after["simulator_overlap"], bool)
    # Unseen, the surprise is ln 16 (half an imagined answer in eight); seen, at most ln 8.
    assert after["simulator_overlap"] == (after["simulator_surprise"] < math.log(16) - 1e-9)


def test_an_empty_conformal_set_counts_as_every_cluster_sampled():
    spread = FakeBackend(decisive_alice())  # four samples: Alice twice, Bruno and Clara once
    # q = 0.4 keeps answers with p >= 0.6: none, so the set counts all three clusters.
    assert asyncio.run(selection.set_size(spread, DC, [], SamplingSettings(), 0.4, random.Random(0))) == 3.0
    assert asyncio.run(selection.set_size(spread, DC, [], SamplingSettings(), 0.5, random.Random(0))) == 1.0
    assert asyncio.run(selection.set_size(spread, DC, [], SamplingSettings(), 0.8, random.Random(0))) == 3.0
    settled = [(ASK_ALICE, "Clara did it.")]
    assert (
        asyncio.run(selection.set_size(spread, DC, settled, SamplingSettings(), 0.5, random.Random(0))) == 1.0
    )


def test_free_text_answers_meet_the_imagined_ones_by_cluster():
    backend = FakeBackend(lambda messages, _: "")
    imagined = {"I was home.": 0.75, "Out walking.": 0.25}
    surprise, overlap = asyncio.run(selection.divergence(backend, DC, imagined, "Out walking."))
    assert (surprise, overlap) == (pytest.approx(math.log(4)), True)
    assert asyncio.run(selection.divergence(backend, DC, imagined, "Asleep."))[1] is False
