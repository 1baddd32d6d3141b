"""The AR-Bench results committed under bench/results, judged again from the trajectories they
recorded with today's `judge` (the isotonic fit behind each rule's ECE now `IsotonicMap`): every
rule's figures equal the ones the runs reported. GN and DC only: an SP result keeps only the
first 200 characters of each hidden story, and F1 against it is not the F1 the run scored."""

import json
from pathlib import Path

import pytest
from sounding.core.stop_rules import STOP_RULES
from sounding_bench.arbench import judge

pytestmark = pytest.mark.unit

RESULTS = Path(__file__).parents[3] / "bench" / "results"
JUDGED_AGAIN = sorted(
    path for path in RESULTS.glob("arbench-*.json") if json.loads(path.read_text())["task"] in ("gn", "dc")
)


def test_the_gn_and_dc_results_are_all_judged_again():
    assert [p.name for p in JUDGED_AGAIN] == [
        "arbench-dc-collapse.json",
        "arbench-dc-normal.json",
        "arbench-gn-collapse.json",
        "arbench-gn-normal.json",
        "arbench-gn-openai-endpoint.json",
    ]


@pytest.mark.parametrize("path", JUDGED_AGAIN, ids=lambda p: p.stem)
def test_judging_the_recorded_trajectories_again_gives_the_reported_figures(path):
    result = json.loads(path.read_text())
    # A DC truth is one of the suspects' names as shown, so it names itself among the choices.
    played = [{**t, "_truth": t["truth"]} for t in result["trajectories"]]
    episodes = [{"id": t["id"], "choices": []} for t in result["trajectories"]]
    rules = list(result["rules"])
    assert set(rules) <= set(STOP_RULES)

    again = judge(result["task"], played, episodes, rules)

    for rule in rules:
        assert again[rule] == pytest.approx(result["rules"][rule], abs=1e-4), rule
