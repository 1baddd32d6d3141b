import asyncio
import itertools
import json
import random

import pytest
from sounding.inquiry.llm import assessment, tasks
from sounding.inquiry.llm.assessment import SamplingSettings

from .fake_backend import FakeBackend

pytestmark = pytest.mark.unit

SUSPECTS = ("Alice Archer", "Bruno Baker", "Clara Cole")
DC = tasks.Problem(tasks.TASK_SPECS["dc"], "A case.", SUSPECTS)


def cycling(*answers):
    """Initial answers cycle through `answers`; a revision repeats the answer it revises."""
    cycle = itertools.cycle(answers)

    def reply(messages, _):
        if messages[-1]["content"].startswith("Reconsider"):
            return messages[-2]["content"]
        return json.dumps({"suspect": next(cycle)})

    return reply


def sample(reply, diversity, samples=4):
    backend = FakeBackend(reply)
    settings = SamplingSettings(samples=samples, diversity=diversity, max_tries=3)
    result = asyncio.run(
        assessment.sample_pairs(backend, DC, [], "base", settings, diversity, random.Random(0))
    )
    return result, backend


def test_plain_sampling_draws_k_pairs_without_weights():
    pairs, backend = sample(cycling("Alice Archer"), "off")
    assert pairs.initial == pairs.revised == ["Alice Archer"] * 4
    assert pairs.weights == [1.0] * 4
    assert len(backend.calls) == 8  # k initial answers and k revisions


def test_diversity_sampling_accepts_distinct_answers_and_weights_recover_frequencies():
    # The model says Alice three times in four: the sampler keeps Alice and Bruno, and the
    # rejected draws make Alice's weight carry her share of what the model said.
    reply = cycling("Alice Archer", "Alice Archer", "Bruno Baker", "Alice Archer")
    weighted, _ = sample(reply, "weighted", samples=2)
    assert sorted(weighted.initial) == ["Alice Archer", "Bruno Baker"]
    alice = sum(w for a, w in zip(weighted.initial, weighted.weights, strict=True) if a == "Alice Archer")
    assert alice / sum(weighted.weights) > 0.6
    unweighted, _ = sample(reply, "unweighted", samples=2)
    assert unweighted.weights == [1.0, 1.0]


def test_a_collapsed_model_still_fills_k_samples():
    pairs, _ = sample(cycling("Clara Cole"), "weighted")
    assert pairs.initial == ["Clara Cole"] * 4
    assert pairs.weights[0] > pairs.weights[-1]


def assess(reply, rules, samples=4, calibration=lambda bucket: assessment.Calibration(0.5)):
    backend = FakeBackend(reply)
    settings = SamplingSettings(samples=samples, max_tries=2)
    measured = asyncio.run(
        assessment.assess(backend, DC, [], 0, set(rules), settings, random.Random(0), calibration)
    )
    return measured, backend


def test_the_set_size_is_measured_with_the_quantile_of_the_states_own_bucket():
    asked = []

    def calibration(bucket):  # a wide set only in the bucket this state falls in
        asked.append(bucket)
        return assessment.Calibration(0.6 if bucket == "low" else 0.3)

    measured, _ = assess(cycling("Alice Archer", "Bruno Baker"), ["mi_only"], calibration=calibration)
    assert measured.bucket == "low" and asked == ["low"]
    assert measured.scores["cip_lite"] == 2.0  # both answers at p = 0.5 >= 1 - 0.6


def test_unanimous_answers_score_zero_mutual_information_and_full_consistency():
    measured, _ = assess(cycling("Bruno Baker"), ["robust_mi_risk"])
    assert measured.scores["robust_mi_risk"] == 0.0
    assert measured.scores["mi_only"] == 0.0
    assert measured.scores["self_consistency"] == 0.0
    assert measured.scores["knowno_set_size"] == 1.0
    assert (measured.answer, measured.answer_share) == ("Bruno Baker", 1.0)
    assert measured.homogeneity["p_max"] == 1.0 and measured.bucket == "high"


def test_answers_that_vary_but_survive_revision_carry_information():
    measured, _ = assess(cycling("Alice Archer", "Bruno Baker"), ["robust_mi_risk"])
    assert measured.scores["mi_only"] == pytest.approx(0.6931, abs=1e-3)  # ln 2
    assert measured.scores["robust_mi_risk"] >= measured.scores["mi_only"] - 1e-9
    assert measured.scores["semantic_entropy"] == pytest.approx(0.6931, abs=1e-3)
    assert measured.scores["knowno_set_size"] == 2.0  # both at p = 0.5 >= 1 - q


def test_unparsed_answers_are_singletons_and_never_the_answer():
    def reply(messages, _):
        if messages[-1]["content"].startswith("Reconsider"):
            return "I cannot tell."
        return '{"suspect": "Clara Cole"}'

    measured, _ = assess(reply, ["mi_only"])
    assert measured.answer == "Clara Cole"  # only initial answers parse; the fallback is the plain majority
    pairs = measured.pairs[0]
    assert len(set(pairs["revised_labels"])) == 4


def test_verbalized_confidence_is_read_and_mapped():
    def reply(messages, _):
        if "confident" in messages[-1]["content"]:
            return '{"suspect": "Alice Archer", "confidence": 9}'
        return '{"suspect": "Alice Archer"}'

    measured, _ = assess(reply, ["verbalized_confidence"])
    assert measured.verbalized_confidence == pytest.approx(0.9)
    assert measured.scores["verbalized_confidence"] == pytest.approx(0.1)
