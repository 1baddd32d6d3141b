import asyncio
import itertools
import json
import math

import pytest
from sounding.inquiry import engine
from sounding.inquiry.llm.domain import Threshold
from sounding.inquiry.protocol import AnswerEvent, AskEvent, BeliefEvent, HypothesisIn, Policy, Start
from sounding.runtime import errors

from .fake_backend import FakeBackend

pytestmark = pytest.mark.unit

SUSPECTS = ("Alice Archer", "Bruno Baker", "Clara Cole")


def dc_start(stop_rule="robust_mi_risk", max_turns=3, **parameters) -> Start:
    return Start(
        "llm",
        Policy(stop_rule=stop_rule, max_turns=max_turns, seed=1),
        {"task": "dc", "samples": "4", **parameters},
        tuple(HypothesisIn(f"s{i}", name) for i, name in enumerate(SUSPECTS)),
        context="Someone killed the host.",
    )


def model(*initial_answers):
    """Initial answers cycle; revisions repeat the answer revised; questions go to Clara."""
    cycle = itertools.cycle(initial_answers)

    def reply(messages, _):
        last = messages[-1]["content"]
        if last.startswith("Reconsider"):
            return messages[-2]["content"]
        if "JSON list" in last:
            return '[{"suspect": "Clara Cole", "question": "Where were you at nine?"}]'
        return json.dumps({"suspect": next(cycle)})

    return reply


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_unanimous_model_answers_at_once_with_its_signal_in_the_belief():
    backend = FakeBackend(model("Bruno Baker"))
    session = engine.start(dc_start())
    belief, answer = run(engine.advance(session, backend))
    assert isinstance(belief, BeliefEvent) and isinstance(answer, AnswerEvent)
    assert (answer.answer, answer.stopping_reason, answer.forced) == (
        "Bruno Baker",
        "confidence_reached",
        False,
    )
    (signal,) = belief.stop_signals
    assert (signal.rule, signal.score, signal.answers, signal.calibration_version) == (
        "robust_mi_risk",
        0.0,
        True,
        0,
    )
    assert belief.homogeneity["p_max"] == 1.0 and belief.homogeneity_bucket == "high"


def test_a_divided_model_asks_and_max_turns_forces_the_answer():
    backend = FakeBackend(model("Alice Archer", "Bruno Baker"))
    session = engine.start(dc_start(max_turns=1))
    events = run(engine.advance(session, backend))
    ask = events[-1]
    assert isinstance(ask, AskEvent) and ask.chosen.question == "Clara Cole: Where were you at nine?"
    assert events[0].stop_signals[0].answers is False
    # The stored session resumes without sampling again.
    calls = len(backend.calls)
    resumed = engine.Session.from_json(session.setup_json(), session.to_json())
    again = run(engine.resume(resumed, backend))
    assert again[-1].chosen.question == ask.chosen.question and len(backend.calls) == calls
    final = run(engine.observe(resumed, ask.chosen.question_id, "In the library.", backend))[-1]
    assert isinstance(final, AnswerEvent)
    assert (final.stopping_reason, final.forced) == ("max_queries_reached", True)
    assert final.answer in SUSPECTS


def test_signals_all_scores_every_rule_but_stops_by_the_policy_rule():
    backend = FakeBackend(model("Alice Archer", "Bruno Baker"))
    session = engine.start(dc_start(stop_rule="self_consistency", signals="all"))
    belief = run(engine.advance(session, backend))[0]
    rules = {s.rule: s for s in belief.stop_signals}
    assert set(rules) == {
        "robust_mi_risk",
        "mi_only",
        "self_consistency",
        "semantic_entropy",
        "verbalized_confidence",
        "knowno_set_size",
        "cip_lite",
    }
    assert rules["self_consistency"].score == pytest.approx(0.5) and not rules["self_consistency"].answers


def test_calibrated_thresholds_apply_per_bucket_and_never_answer_is_honoured():
    backend = FakeBackend(model("Bruno Baker"))
    thresholds = {"robust_mi_risk": {"": Threshold(-math.inf, 3), "medium": Threshold(1.0, 4, "medium")}}
    session = engine.start(dc_start(max_turns=1), thresholds)
    belief, ask = run(engine.advance(session, backend))
    (signal,) = belief.stop_signals
    # Unanimous answers are the "high" bucket: the all-states calibration (never answer) applies.
    assert (signal.threshold, signal.answers, signal.calibration_version) == (-math.inf, False, 3)
    assert isinstance(ask, AskEvent)


def test_the_verbalized_confidence_is_mapped_by_its_buckets_calibration():
    def reply(messages, _):
        if "confident" in messages[-1]["content"]:
            return '{"suspect": "Bruno Baker", "confidence": 9}'
        return (
            messages[-2]["content"]
            if messages[-1]["content"].startswith("Reconsider")
            else ('{"suspect": "Bruno Baker"}')
        )

    # All states' map: nothing stated is worth anything; the "high" bucket's: all of it is.
    thresholds = {
        "verbalized_confidence": {
            "": Threshold(0.2, 1, "", ((0.0, 1.0), (0.0, 0.0))),
            "high": Threshold(0.2, 2, "high", ((0.0, 1.0), (1.0, 1.0))),
        }
    }
    session = engine.start(dc_start("verbalized_confidence", max_turns=1), thresholds)
    belief, answer = run(engine.advance(session, FakeBackend(reply)))
    (signal,) = belief.stop_signals
    # Unanimous answers are the "high" bucket: its map makes the stated 0.9 a certainty.
    assert (signal.score, signal.calibration_version, signal.answers) == (0.0, 2, True)
    assert isinstance(answer, AnswerEvent)


def test_gn_ends_when_the_feedback_says_four_digits_are_in_place():
    replies = {"JSON list": '["1234"]'}

    def reply(messages, _):
        last = messages[-1]["content"]
        for key, value in replies.items():
            if key in last:
                return value
        return messages[-2]["content"] if last.startswith("Reconsider") else '{"guess": "5678"}'

    backend = FakeBackend(reply)
    start = Start("llm", Policy(stop_rule="mi_only", max_turns=5), {"task": "gn", "samples": "2"})
    session = engine.start(start)
    session_events = run(engine.advance(session, backend))
    ask = session_events[-1]
    if isinstance(ask, AnswerEvent):  # unanimous 5678: mi_only answers before asking
        assert ask.answer == "5678"
        return
    final = run(engine.observe(session, ask.chosen.question_id, "4A0B", backend))[-1]
    assert (final.answer, final.stopping_reason) == (ask.chosen.question, "confidence_reached")


@pytest.mark.parametrize(
    ("parameters", "field"),
    [
        ({"task": "chess"}, "start.domain_parameters.task"),
        ({"task": "dc", "regime": "hot"}, "start.domain_parameters.regime"),
        ({"task": "dc", "samples": "1"}, "start.domain_parameters.samples"),
        ({"task": "dc", "diversity": "max"}, "start.domain_parameters.diversity"),
        ({"task": "dc", "policy_model": "simulated"}, "start.domain_parameters.policy_model"),
        ({"task": "gn", "policy_model": "oracle"}, "start.domain_parameters.policy_model"),
    ],
)
def test_bad_parameters_name_the_field(parameters, field):
    start = dc_start()
    bad = Start("llm", start.policy, parameters, start.hypotheses, context=start.context)
    with pytest.raises(errors.InvalidArgument) as raised:
        engine.start(bad)
    assert raised.value.field == field


def test_unknown_stop_rule_and_missing_context_are_rejected():
    with pytest.raises(errors.InvalidArgument) as rule:
        engine.start(dc_start(stop_rule="coin_flip"))
    assert rule.value.field == "start.policy.stop_rule"
    start = dc_start()
    with pytest.raises(errors.InvalidArgument) as context:
        engine.start(Start("llm", start.policy, {"task": "sp"}))
    assert context.value.field == "start.context"


def test_the_token_budget_counts_the_lookahead_and_spares_the_simulation():
    def start(selection, model_parameters):
        return Start(
            "llm",
            Policy(question_selection=selection, stop_rule="robust_mi_risk", max_turns=12, seed=1),
            {"task": "gn", **model_parameters},
        )

    engine.start(start("direct_prompting", {}))
    with pytest.raises(errors.InvalidArgument, match="voi's lookahead") as raised:
        engine.start(start("voi", {}))
    assert raised.value.field == "start.domain_parameters.samples"
    engine.start(start("voi", {"policy_model": "simulated"}))  # generates no tokens
