"""The llm inquiry domain end to end: SmolLM2 in the sidecar samples and revises answers, the
orchestrator scores the states, Observe records them, and Calibrate(STOP_THRESHOLD) fits a
threshold that the next session uses."""

import pytest
from sounding_client import (
    Ask,
    Belief,
    CalibrationReport,
    CalibrationState,
    Hypothesis,
    InquiryAnswer,
    InquiryOutcome,
    InquiryPolicy,
    SoundingError,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CASE = (
    "The host, Mr. Hale, was found dead in his study at nine in the evening, struck with a brass "
    "candlestick. The butler says he heard an argument at half past eight."
)
SUSPECTS = [Hypothesis("s0", "Anna Byrne"), Hypothesis("s1", "Victor Crane"), Hypothesis("s2", "Lucy Dunn")]
FAST = {"task": "dc", "samples": "2", "answer_tokens": "24", "question_tokens": "48"}


def run_session(client, stop_rule, parameters, max_turns=1):
    inquiry = client.inquire(
        "llm",
        InquiryPolicy(stop_rule=stop_rule, max_turns=max_turns),
        hypotheses=SUSPECTS,
        domain_parameters=parameters,
        context=CASE,
        timeout=900,
    )
    events = []
    for event in inquiry:
        events.append(event)
        if isinstance(event, Ask):
            inquiry.answer("I was in the kitchen all evening.")
    return inquiry.session_id, events


def test_a_session_scores_every_rule_records_its_states_and_calibrates_the_next(client):
    session_id, events = run_session(client, "robust_mi_risk", {**FAST, "signals": "all"})
    beliefs = [e for e in events if isinstance(e, Belief)]
    answer = events[-1]
    assert isinstance(answer, InquiryAnswer) and answer.answer in {h.description for h in SUSPECTS} | {""}
    first = beliefs[0]
    rules = {s.rule: s for s in first.stop_signals}
    assert set(rules) == {
        "robust_mi_risk", "mi_only", "self_consistency", "semantic_entropy",
        "verbalized_confidence", "knowno_set_size", "cip_lite",
    }  # fmt: skip
    assert all(s.calibration_version == 0 for s in rules.values())
    assert rules["robust_mi_risk"].score >= 0 and 0 <= first.homogeneity.p_max <= 1
    assert first.homogeneity_bucket in {"high", "medium", "low"}
    asked = [e for e in events if isinstance(e, Ask)]
    if asked:  # the question is addressed to one suspect
        assert asked[0].question.split(":")[0] in {h.description for h in SUSPECTS}
        assert len(beliefs) == 2 and answer.stopping_reason in {"confidence_reached", "max_queries_reached"}

    # Observe: the session's states are recorded once; an unknown session is reported, the rest kept.
    result = client.observe(
        [InquiryOutcome("no-such-session", "Victor Crane"), InquiryOutcome(session_id, "Victor Crane")]
    )
    assert result.recorded == 1
    assert [(r.index, r.code) for r in result.rejected] == [(0, "NOT_FOUND")]
    again = client.observe([InquiryOutcome(session_id, "Victor Crane")])
    assert again.recorded == 0 and again.rejected[0].code == "ALREADY_EXISTS"

    # Two recorded states are too few to calibrate from.
    with pytest.raises(SoundingError) as too_few:
        list(client.calibrate("stop_threshold", task="dc", regime="normal", stop_rule="mi_only"))
    assert too_few.value.code.name == "FAILED_PRECONDITION"

    # Inline states: low scores right, high scores wrong.
    states = [CalibrationState(0.01 * i, False) for i in range(60)] + [
        CalibrationState(1.0 + 0.01 * i, True) for i in range(20)
    ]
    report = list(
        client.calibrate("stop_threshold", task="dc", regime="normal", stop_rule="mi_only", states=states)
    )[-1]
    assert isinstance(report, CalibrationReport) and report.target == "stop_threshold"
    assert report.version == "1" and report.sample_size == 80
    assert 0.59 <= report.diagnostics["tau"] < 1.2 and report.diagnostics["risk_upper_bound"] <= 0.1
    risk, bound, delta, chosen = report.curves
    assert risk.name == "empirical risk" and bound.name.startswith("Clopper-Pearson")
    assert len(risk.x) == len(risk.y) == len(bound.y) >= 2
    assert all(b >= r for r, b in zip(risk.y, bound.y, strict=True))  # the bound is above the risk
    assert delta.y == (0.1, 0.1) and chosen.name == "chosen tau"

    # The next session of the task and regime uses the calibrated threshold.
    _, later = run_session(client, "mi_only", FAST)
    (signal,) = next(e for e in later if isinstance(e, Belief)).stop_signals
    assert signal.rule == "mi_only" and signal.calibration_version == 1
    assert signal.threshold == pytest.approx(report.diagnostics["tau"])


def test_calibrate_chooses_the_threshold_by_the_prefix_rule_asked_for(client):
    # 40 right states, 10 wrong, then 400 right: fixed-sequence testing (the default) stops
    # where the errors start; the specification's largest prefix looks past them. (Its own task
    # key, "gn+weights", so that no other test's sessions read these thresholds.)
    states = [CalibrationState(float(i), 40 <= i < 50) for i in range(450)]
    reports = {
        rule: list(
            client.calibrate(
                "stop_threshold",
                task="gn+weights",
                regime="collapse",
                stop_rule="mi_only",
                states=states,
                threshold_rule=rule,
            )
        )[-1]
        for rule in ("", "largest_prefix")
    }
    assert "(fixed_sequence)" in reports[""].summary and reports[""].diagnostics["tau"] < 40
    assert "(largest_prefix)" in reports["largest_prefix"].summary
    assert reports["largest_prefix"].diagnostics["tau"] > 50
    assert reports["largest_prefix"].diagnostics["risk_upper_bound"] <= 0.1


def test_bad_llm_requests_name_the_field(client):
    with pytest.raises(SoundingError) as bad_rule:
        list(run_session(client, "coin_flip", FAST)[1])
    assert bad_rule.value.code.name == "INVALID_ARGUMENT"
    assert bad_rule.value.field_violations[0].field == "start.policy.stop_rule"
    with pytest.raises(SoundingError) as bad_task:
        list(run_session(client, "mi_only", {**FAST, "task": "chess"})[1])
    assert bad_task.value.field_violations[0].field == "start.domain_parameters.task"
    with pytest.raises(SoundingError) as bad_calibration:
        list(client.calibrate("stop_threshold", task="dc", regime="hot"))
    assert bad_calibration.value.field_violations[0].field == "regime"
    with pytest.raises(SoundingError) as bad_prefix_rule:
        list(client.calibrate("stop_threshold", task="dc", regime="normal", threshold_rule="smallest"))
    assert bad_prefix_rule.value.field_violations[0].field == "threshold_rule"
    with pytest.raises(SoundingError) as set_rule:
        list(
            client.calibrate(
                "stop_threshold",
                task="dc",
                regime="normal",
                stop_rule="cip_lite",
                threshold_rule="largest_prefix",
            )
        )
    assert set_rule.value.field_violations[0].field == "threshold_rule"
