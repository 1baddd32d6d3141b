import json
from pathlib import Path

import pytest
from sounding_bench import arbench_compare
from sounding_bench.arbench_compare import NotComparable, compare

pytestmark = pytest.mark.unit

RESULTS = Path(__file__).parents[3] / "bench" / "results"


def run(task: str, outcomes: dict[str, list[tuple[str, float, int, bool]]]) -> dict:
    """A result as `sounding eval arbench` writes it, reduced to what a comparison reads."""
    return {
        "task": task,
        "rules": {rule: {} for rule in outcomes},
        "per_episode": {
            rule: [{"id": i, "score": s, "questions": q, "forced": f} for i, s, q, f in found]
            for rule, found in outcomes.items()
        },
    }


def test_systems_are_paired_on_the_episodes_every_run_shares():
    ours = run(
        "dc",
        {
            "robust_mi_risk": [
                ("e1", 1, 2, False),
                ("e2", 1, 3, False),
                ("e3", 0, 5, True),
                ("e4", 1, 1, False),
            ],
            "mi_only": [("e1", 1, 5, True), ("e2", 0, 5, True), ("e3", 0, 5, True), ("e4", 1, 4, False)],
        },
    )
    cip = run(
        "dc",
        {"cip_lite": [("e1", 0, 0, False), ("e2", 1, 0, False), ("e3", 0, 0, False), ("e9", 1, 0, False)]},
    )
    found = compare({"voi": ours, "cip_full": cip})
    assert found["reference"] == "voi/robust_mi_risk"
    assert found["episode_ids"] == ["e1", "e2", "e3"] and found["episodes_paired"] == 3
    assert found["runs"] == {
        "voi": {"regime": None, "settings": {}},
        "cip_full": {"regime": None, "settings": {}},
    }
    assert found["episodes_left_out"] == {"voi/robust_mi_risk": 1, "voi/mi_only": 1, "cip_full/cip_lite": 1}
    assert found["systems"]["cip_full/cip_lite"] == {
        "score": pytest.approx(1 / 3, abs=1e-4),
        "questions": 0,
        "forced": 0,
    }
    versus_cip = found["reference_minus"]["cip_full/cip_lite"]
    assert versus_cip["score"]["difference"] == pytest.approx(1 / 3, abs=1e-4)
    assert versus_cip["questions"] == {
        "difference": pytest.approx(10 / 3, abs=1e-4),
        "interval_95": [2.0, 5.0],
    }
    assert found["reference_minus"]["voi/mi_only"]["forced"]["difference"] == pytest.approx(-2 / 3, abs=1e-4)
    assert set(found["reference_minus"]) == {"voi/mi_only", "cip_full/cip_lite"}

    chosen = compare({"voi": ours, "cip_full": cip}, reference="cip_full/cip_lite")
    assert chosen["reference_minus"]["voi/robust_mi_risk"]["score"]["difference"] == pytest.approx(
        -1 / 3, abs=1e-4
    )


def test_runs_that_cannot_be_paired_are_refused_with_the_reason():
    gn = run("gn", {"robust_mi_risk": [("a", 1, 1, False)]})
    with pytest.raises(NotComparable, match="different tasks"):
        compare({"gn": gn, "dc": run("dc", {"robust_mi_risk": [("a", 1, 1, False)]})})
    with pytest.raises(NotComparable, match="share no episode"):
        compare({"one": gn, "two": run("gn", {"robust_mi_risk": [("b", 1, 1, False)]})})
    with pytest.raises(NotComparable, match="no system 'gn/cip_lite'"):
        compare({"gn": gn}, reference="gn/cip_lite")
    with pytest.raises(NotComparable, match="share a file name"):
        arbench_compare.run_names(["a/run.json", "b/run.json"])
    with pytest.raises(NotComparable, match="clipped"):
        compare({"sp": {"task": "sp", "rules": {}, "trajectories": []}})
    with pytest.raises(NotComparable, match="different data files"):
        compare({"train": {**gn, "data": "gn/train.json"}, "test": {**gn, "data": "gn/test.json"}})
    with pytest.raises(NotComparable, match="one episode twice"):
        compare({"twice": run("gn", {"robust_mi_risk": [("a", 1, 1, False), ("a", 0, 2, False)]})})


def test_one_shared_episode_gives_a_difference_but_no_interval():
    one = run("gn", {"robust_mi_risk": [("3", 1, 2, False)], "mi_only": [("3", 0, 5, True)]})
    found = compare({"one": one})
    assert found["reference_minus"]["one/mi_only"]["score"] == {"difference": 1.0, "interval_95": None}


def test_a_result_without_per_episode_outcomes_is_judged_again_from_its_trajectories():
    """A gn result written before `per_episode` existed: each rule's means equal its reported ones."""
    result = json.loads((RESULTS / "arbench-gn-normal.json").read_text())
    assert "per_episode" not in result
    found = compare({"gn-normal": result})
    for rule, reported in result["rules"].items():
        system = found["systems"][f"gn-normal/{rule}"]
        assert system["score"] == pytest.approx(reported["accuracy"], abs=1e-4)
        assert system["questions"] == pytest.approx(reported["mean_questions"], abs=1e-3)
        assert system["forced"] == pytest.approx(reported["forced_rate"], abs=1e-3)
