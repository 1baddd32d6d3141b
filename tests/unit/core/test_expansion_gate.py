import numpy as np
import pytest
from sounding.core.expansion_gate import (
    LATENCY_BUDGET,
    NO_EXPECTED_GAIN,
    NO_OUTCOMES,
    ExpansionGate,
    ExpansionGateConfig,
    ExpansionStep,
)

pytestmark = pytest.mark.unit

DRAWS = 400


def step(strategy="synonym", *added):
    return ExpansionStep(strategy, tuple(added), 50.0)


def admitted_share(gate, collection="c", strategy="synonym", remaining_ms=1000.0):
    rng = np.random.default_rng(0)
    return np.mean([gate.refusal(collection, strategy, remaining_ms, rng) == "" for _ in range(DRAWS)])


def test_a_collection_without_outcomes_expands_nothing_unless_the_caller_asks():
    gate = ExpansionGate()
    rng = np.random.default_rng(0)
    assert gate.refusal("c", "synonym", 1e9, rng) == NO_OUTCOMES
    assert gate.refusal("c", "synonym", 1e9, rng, requested=True) == ""


def test_a_step_expected_to_outlast_the_time_left_is_refused_even_when_asked_for():
    gate = ExpansionGate(ExpansionGateConfig(unmeasured_step_ms=200.0))
    rng = np.random.default_rng(0)
    assert gate.refusal("c", "synonym", 199.0, rng, requested=True) == LATENCY_BUDGET
    gate.step_latency.measured("synonym", 20.0)
    assert gate.expected_step_ms("synonym") == 20.0
    assert gate.refusal("c", "synonym", 199.0, rng, requested=True) == ""


def test_usefulness_is_learned_per_collection_and_strategy_from_the_documents_a_step_added():
    gate = ExpansionGate()
    for _ in range(30):
        # synonym's steps add the document the agent used; hyponym's add one it did not use
        gate.learn("c", [step("synonym", "d"), step("hyponym", "e")], used=["d", "a"])
    gate.learn("other", [], used=["a"])
    assert gate.posterior("c", "synonym") == (1.0 + 30, 19.0)
    assert gate.posterior("c", "hyponym") == (1.0, 19.0 + 30)
    assert gate.posterior("other", "synonym") == (1.0, 19.0)
    # a used document the step did not add is not the step's doing
    gate.learn("c", [step("related_concept", "x")], used=["a"])
    assert gate.posterior("c", "related_concept") == (1.0, 20.0)


def test_steps_that_surface_used_documents_run_and_steps_that_do_not_stop_running():
    gate = ExpansionGate(ExpansionGateConfig(used_document_worth_ms=1000.0, unmeasured_step_ms=100.0))
    gate.learn("c", [], used=[])  # the collection has outcomes, none about a step yet
    prior = admitted_share(gate)
    assert 0.05 < prior < 0.3  # the prior explores a little: P(p > 0.1) under Beta(1, 19)
    for _ in range(40):
        gate.learn("c", [step("synonym", "d")], used=["d"])
        gate.learn("c", [step("hyponym", "e")], used=["d"])
    assert admitted_share(gate, strategy="synonym") > 0.95
    assert admitted_share(gate, strategy="hyponym") < 0.01
    rng = np.random.default_rng(0)
    refusals = [gate.refusal("c", "hyponym", 1000.0, rng) for _ in range(50)]
    assert set(refusals) <= {"", NO_EXPECTED_GAIN} and refusals.count(NO_EXPECTED_GAIN) >= 48


def test_the_gain_is_weighed_against_the_measured_latency():
    gate = ExpansionGate(ExpansionGateConfig(used_document_worth_ms=1000.0))
    for index in range(100):
        # useful on a third of the retrievals: worth about 330 ms a step
        gate.learn("c", [step("synonym", "d")], used=["d"] if index % 3 == 0 else [])
    gate.step_latency.measured("synonym", 100.0)
    assert admitted_share(gate) > 0.95
    gate.step_latency.measured("slow", 900.0)
    for index in range(100):
        gate.learn("c", [step("slow", "d")], used=["d"] if index % 3 == 0 else [])
    assert admitted_share(gate, strategy="slow") < 0.05
