import pytest
from sounding.core.stop_rules import STOP_RULES
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding_bench import robust_mi_judgement as judgement
from sounding_bench import robust_mi_simulated as harness

pytestmark = pytest.mark.unit

SECRET = "4567"
TURNS = [["0123", bc.feedback_sentence(0, 0)], ["4568", bc.feedback_sentence(3, 0)], ["4567", "solved"]]


def state(answer: str, answering: set[str], score: float = 0.5, bucket: str = "high") -> dict:
    return {
        "answer": answer,
        "bucket": bucket,
        "signals": {rule: [score, 0.1, rule in answering] for rule in STOP_RULES},
    }


def episode(states: list[dict], turns=TURNS) -> dict:
    return {"states": states, "questions": turns, "_truth": SECRET}


def test_a_rule_answering_early_is_premature_and_one_that_waits_is_right_when_the_game_solves():
    played = episode([state("9876", {"self_consistency"}), state("4568", set()), state("4567", set())])
    early = judgement.rule_outcome("self_consistency", played)
    assert early == {"correct": False, "questions": 0, "premature": True, "forced": False, "bucket": "high"}
    waiting = judgement.rule_outcome("robust_mi_risk", played)
    assert waiting == {"correct": True, "questions": 3, "premature": False, "forced": False, "bucket": "high"}


def test_answering_where_one_secret_is_left_is_not_premature_and_a_cap_forces_the_last_answer():
    # After 0123 (no digit) and 4568 (three in place), 4567 and 4569 remain: two secrets.
    two_left = episode([state("9876", set()), state("4568", set()), state("4567", {"mi_only"})])
    assert judgement.rule_outcome("mi_only", two_left)["premature"]
    capped = episode([state("9876", set()), state("4569", set())], TURNS[:2])
    assert judgement.rule_outcome("mi_only", capped) == {
        "correct": False,
        "questions": 2,
        "premature": True,
        "forced": True,
        "bucket": "high",
    }
    solved_from_one = [["0123", bc.feedback_sentence(0, 0)], ["4567", bc.feedback_sentence(4, 0)]]
    assert len(harness.consistent_guesses(solved_from_one)) == 1


def test_the_split_is_seeded_and_disjoint():
    calibration, test = harness.split_secrets(30, 50, seed=1)
    assert (calibration, test) == harness.split_secrets(30, 50, seed=1)
    assert len(set(calibration) | set(test)) == 80
    with pytest.raises(ValueError):
        harness.split_secrets(5000, 100, seed=1)


def test_the_criteria_read_the_collapse_regime():
    lower = {"premature": {"interval_95": [-0.6, -0.4]}, "accuracy": {"interval_95": [0.1, 0.3]}}
    collapse = {
        "robust_mi_minus": {rule: lower for rule in STOP_RULES if rule != "robust_mi_risk"},
        "high_bucket_correlations": {"robust_mi_minus_set_size": {"interval_95": [-0.1, 0.2]}},
    }
    judged = judgement.criteria(collapse)
    assert judged["2_lower_premature_rate_than_every_other_rule"]["holds"]
    assert not judged["3_mi_error_correlation_above_set_size_in_high_bucket"]["holds"]
    assert judged["4_robust_mi_accuracy_above_naive_mi"]["holds"]


def test_high_bucket_correlations_separate_a_score_that_tracks_error_from_one_that_does_not():
    episodes = []
    for i in range(40):
        wrong, right = state("0000", set(), score=1.0 + i / 100), state(SECRET, set(), score=0.0)
        for s, size in ((wrong, 1.0), (right, 1.0 + (i % 2))):
            s["signals"]["knowno_set_size"][0] = size
        episodes.append(episode([wrong, right, state(SECRET, set(), bucket="low")]))
    found = judgement.correlations(episodes, seed=0)
    assert found["states"] == 80 and found["robust_mi_risk"] > 0.8
    assert found["robust_mi_minus_set_size"]["interval_95"][0] > 0.5


def test_by_bucket_reports_the_answers_given_at_each_buckets_states():
    # self_consistency answers at a high state (wrongly, prematurely) in one episode and at a
    # low state in the other: rightly, but with 4567 and 4569 both left, still prematurely;
    # robust MI never answers (forced).
    early = episode([state("9876", {"self_consistency"}), state("4568", set(), bucket="low")])
    late = episode(
        [state("9876", set()), state("4568", set()), state(SECRET, {"self_consistency"}, bucket="low")]
    )
    played = [early, late]
    outcomes = {rule: [judgement.rule_outcome(rule, e) for e in played] for rule in STOP_RULES}
    found = judgement.by_bucket(played, outcomes)
    assert [found[b]["states"] for b in ("high", "medium", "low")] == [3, 0, 2]
    consistency = {b: found[b]["answers"]["self_consistency"] for b in ("high", "low")}
    assert consistency["high"] == {"answered": 1, "accuracy": 0.0, "premature_rate": 1.0}
    assert consistency["low"] == {"answered": 1, "accuracy": 1.0, "premature_rate": 1.0}
    assert found["high"]["answers"]["robust_mi_risk"] == {
        "answered": 0,
        "accuracy": None,
        "premature_rate": None,
    }
    assert found["medium"]["score_error_spearman"]["robust_mi_risk"] is None


def test_functional_diversity_is_the_mean_over_episodes():
    one = episode([], [["0123", "x"], ["4567", "y"]])
    other = episode([], [["0123", "x"]])
    assert judgement.functional_diversity([one, other]) == {"digits_tested": 0.6, "placements_tested": 0.15}


def test_hypothesis_entropy_is_judged_in_planning_sessions_by_its_own_answer():
    def planned(answer: str, answering: set[str], own: str, entropy: float) -> dict:
        found = state(answer, answering)
        found["signals"]["hypothesis_entropy"] = [entropy, 0.5, "hypothesis_entropy" in answering, own]
        return found

    # Two secrets left after 4568: the set's MAP names the secret where the state's answer does not.
    played = episode(
        [
            planned("9876", set(), "1234", 8.5),
            planned("4568", set(), "4569", 0.69),
            planned("4569", {"hypothesis_entropy"}, "4567", 0.0),
        ]
    )
    assert judgement.rules_of([played]) == [*STOP_RULES, "hypothesis_entropy"]
    assert judgement.rules_of([episode([state("9876", set())])]) == list(STOP_RULES)
    judged = judgement.judge([played], seed=0)
    assert judged["rules"]["hypothesis_entropy"]["accuracy"] == 1.0
    assert "hypothesis_entropy" in judged["robust_mi_minus"]
    # The set's answer was wrong at the first two states and right at the third.
    states = judgement._bucket_states([played], "high")
    assert [s[1]["hypothesis_entropy"][1] for s in states] == [True, True, False]
    assert [s[1]["mi_only"][1] for s in states] == [True, True, True]
    compact = harness._compact(played)
    assert compact["states"][2]["signals"]["hypothesis_entropy"] == [0.0, 0.5, True, "4567"]
