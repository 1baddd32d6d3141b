"""`sounding eval retrieval --train-split …` on a tiny BEIR directory with a stack of its own: the
selector learns over the train queries, the regret is taken against the best fixed plan (every
set of arms fused), and every query's mode, arms and ranking are recorded."""

import json

import numpy as np
import pytest
from rich.console import Console
from sounding.settings.config import ModelsSettings, Settings
from sounding_bench import adaptive

from .conftest import SHORT_NLI_TRAINING, free_port, write_tiny_corpus

pytestmark = pytest.mark.integration

TRAIN = {
    "t1": ("how do ships measure water depth", "sonar"),
    "t2": ("why does dough rise", "bread"),
    "t3": ("how did sailors sound by hand", "lead"),
}
TEST = {"s1": ("what pulls the tides", "tide"), "s2": ("depths on nautical charts", "chart")}


def write_beir(path) -> None:
    write_tiny_corpus(path)
    queries = {**TRAIN, **TEST}
    (path / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": q, "text": t, "metadata": {}}) for q, (t, _) in queries.items()) + "\n"
    )
    for split, chosen in (("train", TRAIN), ("test", TEST)):
        (path / "qrels" / f"{split}.tsv").write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, (_, d) in chosen.items())
        )


def test_the_adaptive_harness_measures_regret_against_every_fixed_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("SOUNDING_RETRIEVAL__SELECTION__ARMS", '["dense", "lexical"]')
    monkeypatch.setenv("SOUNDING_RETRIEVAL__SELECTION__COLD_START_QUERIES", "1")
    # No arm is held back as costly whatever their measured latencies (a busy machine's).
    monkeypatch.setenv("SOUNDING_RETRIEVAL__SELECTION__COSTLY_RATIO", "1e9")
    for key, value in SHORT_NLI_TRAINING.items():
        monkeypatch.setenv(key, value)
    data = tmp_path / "tinybeir"
    write_beir(data)
    settings = Settings(
        data_dir=tmp_path / "harness",
        address=f"127.0.0.1:{free_port()}",
        models=ModelsSettings(address=f"127.0.0.1:{free_port()}"),
    )
    result, png = adaptive.run(adaptive.AdaptiveRun(data, "train", "test"), settings, Console(quiet=True))

    assert png.startswith(b"\x89PNG")
    # Three train outcomes are too few to fit a query adapter: the refusal is recorded.
    assert result["query_adapter"]["deployed"] is False
    assert "needs at least 50 observed retrievals" in result["query_adapter"]["refused"]
    fixed = result["fixed_plans_test"]
    assert set(fixed) == {"dense", "lexical", "dense+lexical"}
    for plan in fixed.values():  # one relevant document each: the reward is nDCG@10 less at most 0.2
        assert plan["ndcg@10"] - 0.2 - 1e-4 <= plan["mean_reward"] <= plan["ndcg@10"] + 1e-4
    regret = result["regret"]
    assert regret["best_fixed_plan"] in fixed
    assert (regret["first_query"], len(regret["cumulative"])) == (2, 2)
    train, test = result["per_query"]["train"], result["per_query"]["test"]
    assert [q["query_id"] for q in train] == list(TRAIN) and [q["query_id"] for q in test] == list(TEST)
    assert train[0]["mode"] == "cold_start" and train[0]["arms"] == ["dense", "lexical"]
    assert all(q["mode"] in ("exploit", "explore", "forced_all") for q in train[1:] + test)
    for query in test:  # each query's own ranking scores it: the relevant document first scores 1
        relevant = TEST[query["query_id"]][1]
        assert (query["ndcg@10"] == 1.0) == (query["top10"][0] == relevant)
    comparisons, adaptive_system = result["comparisons"], result["systems"]["adaptive"]
    best = comparisons["best_fixed_plan"]
    assert comparisons["adaptive_minus_best_fixed_plan_ndcg"] == pytest.approx(
        adaptive_system["ndcg@10"] - fixed[best]["ndcg@10"], abs=1e-4
    )
    # The §5.4 reward: adaptive's is the mean of its queries'; each plan's is the selector's.
    assert adaptive_system["mean_reward"] == pytest.approx(np.mean([q["reward"] for q in test]), abs=1e-4)
    by_reward = comparisons["best_fixed_plan_by_reward"]
    assert fixed[by_reward]["mean_reward"] == max(plan["mean_reward"] for plan in fixed.values())
    assert comparisons["adaptive_minus_best_fixed_plan_reward"] == pytest.approx(
        adaptive_system["mean_reward"] - fixed[by_reward]["mean_reward"], abs=1e-4
    )
    assert result["systems"]["dense"]["mean_reward"] == fixed["dense"]["mean_reward"]
