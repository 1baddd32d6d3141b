import json

import pytest
from sounding.inquiry.llm.tasks import bulls_and_cows
from sounding_bench import arbench, arbench_episodes

pytestmark = pytest.mark.unit


def test_gn_feedback_uses_ar_bench_wording_and_round_trips():
    feedback = arbench_episodes.gn_feedback("0435", "0453")
    assert feedback.startswith("2 digits are present in the answer and in the correct positions")
    assert bulls_and_cows(feedback) == (2, 2)
    assert bulls_and_cows(arbench_episodes.gn_feedback("0435", "0435")) == (4, 0)


def test_dc_label_indexes_the_shuffled_suspects(tmp_path):
    case = {
        "index": 7,
        "initial_information": {
            "time": "Evening",
            "location": "Library",
            "victim": {"name": "V", "introduction": "i", "cause_of_death": "c", "murder_weapon": "w"},
            "suspect": [{"name": "B", "introduction": "b"}, {"name": "A", "introduction": "a"}],
        },
        "suspects": [{"name": "A", "task": "You are the murderer."}, {"name": "B", "task": "You saw it."}],
        "label": 1,
    }
    path = tmp_path / "dc.json"
    path.write_text(json.dumps([case]))
    (episode,) = arbench_episodes.load_episodes("dc", path, None)
    assert episode["choices"] == ["B", "A"] and episode["truth"] == "A" and episode["id"] == "7"
    assert episode["npc"]["A"]["task"] == "You are the murderer."


def trajectory(truth, states):
    return {"id": "0", "_truth": truth, "states": states, "questions": []}


def state(answer, **signals):
    return {"answer": answer, "signals": {rule: list(v) for rule, v in signals.items()}}


def test_each_rule_is_judged_where_it_would_answer_on_the_shared_trajectory():
    states = [
        state("1234", mi_only=(0.5, 0.1, False), self_consistency=(0.1, 0.2, True)),
        state("5678", mi_only=(0.05, 0.1, True), self_consistency=(0.0, 0.2, True)),
        state("5678", mi_only=(0.0, 0.1, True), self_consistency=(0.0, 0.2, True)),
    ]
    episodes = [{"id": "0", "choices": []}]
    judged = arbench.judge("gn", [trajectory("5678", states)], episodes, ["mi_only", "self_consistency"])
    # self_consistency answers at once (wrong); mi_only waits one question and is right.
    assert (judged["self_consistency"]["accuracy"], judged["self_consistency"]["mean_questions"]) == (0.0, 0)
    assert (judged["mi_only"]["accuracy"], judged["mi_only"]["mean_questions"]) == (1.0, 1)
    assert judged["mi_only"]["forced_rate"] == 0.0 and judged["mi_only"]["visited_states"] == 3


def test_hypothesis_entropy_is_judged_by_its_own_answer_not_the_states():
    states = [
        state("1234", mi_only=(0.5, 0.1, False), hypothesis_entropy=(1.2, 0.5, False, "9012")),
        state("1234", mi_only=(0.0, 0.1, True), hypothesis_entropy=(0.0, 0.5, True, "5678")),
    ]
    episodes = [{"id": "0", "choices": []}]
    found = arbench.per_episode(
        "gn", [trajectory("5678", states)], episodes, ["mi_only", "hypothesis_entropy"]
    )
    assert found["mi_only"][0]["score"] == 0.0  # the state's answer, wrong
    assert found["hypothesis_entropy"][0] == {"id": "0", "score": 1.0, "questions": 1, "forced": False}


def test_by_bucket_reports_where_each_rule_answered_and_its_score_error_correlation():
    def at(bucket, answer, homogeneity=None, **signals):
        return {**state(answer, **signals), "bucket": bucket, "homogeneity": homogeneity or {}}

    first = [
        at(
            "high",
            "1234",
            {"p_max": 1.0, "prompt_sensitivity": 0.5, "simulator_surprise": 2.0},
            mi_only=(0.9, 0.1, False),
            self_consistency=(0.1, 0.2, True),
        ),
        at("low", "5678", {"p_max": 0.25}, mi_only=(0.05, 0.1, True), self_consistency=(0.0, 0.2, True)),
    ]
    second = [
        at(
            "high",
            "5678",
            {"p_max": 0.5, "prompt_sensitivity": 0.0},
            mi_only=(0.2, 0.1, False),
            self_consistency=(0.1, 0.2, True),
        ),
        at("high", "5678", mi_only=(0.1, 0.1, False), self_consistency=(0.0, 0.2, True)),
    ]
    played = [{**trajectory("5678", first), "id": "0"}, {**trajectory("5678", second), "id": "1"}]
    episodes = [{"id": "0", "choices": []}, {"id": "1", "choices": []}]
    found = arbench.by_bucket("gn", played, episodes, ["mi_only", "self_consistency"])
    assert [found[b]["states"] for b in ("high", "medium", "low")] == [3, 0, 1]
    # Every axis a bucket's states carry, averaged over those that carry it.
    assert found["high"]["homogeneity_mean"] == {
        "p_max": 0.75,
        "prompt_sensitivity": 0.25,
        "simulator_surprise": 2.0,
    }
    assert found["low"]["homogeneity_mean"] == {"p_max": 0.25} and found["medium"]["homogeneity_mean"] == {}
    # self_consistency answers at once in both: wrongly in the first, rightly in the second.
    assert found["high"]["self_consistency"]["answered"] == 2
    assert found["high"]["self_consistency"]["mean_score"] == 0.5
    # mi_only answers at the first's low state (right) and never in the second (forced).
    assert found["low"]["mi_only"] == {"answered": 1, "mean_score": 1.0, "spearman_score_error": None}
    assert found["high"]["mi_only"]["answered"] == 0
    # High states: mi_only 0.9 (wrong), 0.2 and 0.1 (right): the score tracks the error.
    assert found["high"]["mi_only"]["spearman_score_error"] > 0.8


def test_means_skip_what_a_state_did_not_compute():
    states = [
        {"p_max": 0.5, "effective_rank": None},
        {"p_max": 1.0, "effective_rank": 2.0},
        {},
        {"p_max": None, "effective_rank": None, "trigram_jaccard": None},
    ]
    assert arbench.means(states) == {"p_max": 0.75, "effective_rank": 2.0, "trigram_jaccard": None}
    assert arbench.means([]) == {}
