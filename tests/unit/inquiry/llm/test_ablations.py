import asyncio

import pytest
from sounding.inquiry import engine
from sounding.inquiry.llm import ablations, tasks
from sounding.inquiry.llm.assessment import SamplingSettings
from sounding.inquiry.llm.domain import LlmInquiry, Threshold
from sounding.inquiry.protocol import Policy, Start
from sounding.runtime import errors

pytestmark = pytest.mark.unit


def test_the_named_ablations_are_validated_and_sorted():
    assert ablations.named({"ablate": " voi,dpp ,voi"}) == ["dpp", "voi"]
    assert ablations.named({}) == []
    with pytest.raises(errors.InvalidArgument) as refused:
        ablations.named({"ablate": "dpp,episode_tau"})
    assert refused.value.field == "start.domain_parameters.ablate" and "episode_tau" in str(refused.value)


@pytest.mark.parametrize(
    ("ablate", "changed"),
    [
        ("robust", {"variants": 1, "diversity": "off"}),
        ("weights", {"diversity": "unweighted"}),
        ("dpp", {"slate": "top"}),
        ("voi", {"choice": "random"}),
        ("mi_to_sc", {"measure": "self_consistency"}),
        ("mi_to_setsize", {"measure": "set_size"}),
        ("risk_tau", {}),
        ("entailment", {}),
    ],
)
def test_each_ablation_changes_only_its_own_settings(ablate, changed):
    full = SamplingSettings()
    ablated = ablations.sampling(full, [ablate])
    differing = {k: v for k, v in vars(ablated).items() if getattr(full, k) != v}
    assert differing == changed


def test_without_entailment_sp_answers_are_clustered_by_embedding_also_after_a_resume():
    assert tasks.TASK_SPECS["sp"].cluster_method == "entailment"
    start = Start(
        "llm",
        Policy(question_selection="direct_prompting", stop_rule="mi_only"),
        {"task": "sp", "ablate": "entailment"},
        context="A man asks for water and is handed a gun.",
    )
    session = engine.start(start)
    assert session.domain_setup["ablate"] == ["entailment"]
    resumed = LlmInquiry.from_state(session.domain_setup, session.domain_state)
    assert resumed.problem.task.cluster_method == "embedding"


def test_without_risk_control_every_rule_keeps_its_default_threshold():
    calibrated = {"mi_only": {"": Threshold(0.42, version=3)}}
    parameters = {"task": "gn", "policy_model": "simulated"}
    policy = Policy(stop_rule="mi_only")
    used = engine.start(Start("llm", policy, parameters), calibrated).domain_setup["thresholds"]["mi_only"]
    assert used[""]["value"] == 0.42 and used[""]["version"] == 3
    ablated = engine.start(Start("llm", policy, {**parameters, "ablate": "risk_tau"}), calibrated)
    default = ablated.domain_setup["thresholds"]["mi_only"][""]
    assert default["version"] == 0 and default["value"] != 0.42


def test_without_robustness_the_state_is_measured_with_one_unsteered_prompt_variant():
    def sampled_variants(parameters):
        start = Start("llm", Policy(stop_rule="robust_mi_risk", max_turns=2, seed=1), parameters)
        session = engine.start(start)
        asyncio.run(engine.advance(session))
        pairs = session.domain_state["assessments"][0]["pairs"]
        return [p["variant"] for p in pairs], {w for p in pairs[1:] for w in p["weights"]}

    parameters = {"task": "gn", "policy_model": "simulated"}
    variants, _ = sampled_variants(parameters)
    assert variants == ["plain", *tasks.VARIANTS]
    variants, weights = sampled_variants({**parameters, "ablate": "robust"})
    assert variants == ["plain", "base"] and weights == {1.0}


@pytest.mark.parametrize(
    ("ablate", "task", "selection"),
    [
        ("dpp", "gn", "direct_prompting"),
        ("voi", "sp", "eig"),
        ("mi_to_sc", "gn", "cip_full"),
        ("entailment", "gn", "voi"),
        ("entailment", "dc", "direct_prompting"),
        ("mi_to_sc,mi_to_setsize", "gn", "voi"),
    ],
)
def test_an_ablation_that_would_change_nothing_is_refused(ablate, task, selection):
    named = ablations.named({"ablate": ablate})
    with pytest.raises(errors.InvalidArgument) as refused:
        ablations.validate(named, task, selection)
    assert refused.value.field == "start.domain_parameters.ablate"


def test_applicable_ablations_depend_on_the_task_and_the_question_selection():
    every = list(ablations.SESSION_ABLATIONS)
    assert ablations.applicable(every, "gn", "direct_prompting") == ["risk_tau", "robust", "weights"]
    assert ablations.applicable(every, "sp", "voi") == every
    ablations.validate(["dpp", "entailment", "robust"], "sp", "voi")  # all change an sp voi session


def test_sessions_measured_differently_are_calibrated_apart_and_only_those():
    assert ablations.calibration_task("sp", "sidecar", []) == "sp"
    assert ablations.calibration_task("gn", "simulated", ["robust"]) == "gn_simulated+robust"
    assert ablations.calibration_task("sp", "sidecar", ["weights", "dpp", "entailment", "risk_tau"]) == (
        "sp+entailment+weights"
    )
    assert ablations.is_calibration_task("sp+entailment+weights") and ablations.is_calibration_task("dc")
    for name in ("sp+weights+entailment", "sp+dpp", "sp+robust+robust", "chess", "gn_simulated+nothing"):
        assert not ablations.is_calibration_task(name), name


def test_an_ablated_sessions_states_and_thresholds_are_kept_under_its_own_task():
    parameters = {"task": "gn", "policy_model": "simulated", "ablate": "robust,risk_tau"}
    assert LlmInquiry.calibration_scope(parameters) == ("gn_simulated+robust", "normal")
