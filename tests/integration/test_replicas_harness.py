"""`sounding eval replicas` on a tiny BEIR directory, on the session stack's sidecar: every
part of the protocol runs to its figures, and the figures are the ones its own data give."""

import pytest
from rich.console import Console
from sounding_bench import replicas

from .test_throughput_harness import write_beir

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_propagation_the_cost_of_following_and_throughput_behind_envoy_are_measured(stack, tmp_path):
    data = tmp_path / "tinybeir"
    write_beir(data)
    settings = stack.settings.model_copy(update={"data_dir": tmp_path / "harness"})
    spec = replicas.ReplicasRun(
        data, "test", documents=4, trials=2, rounds=1, clients=1, seconds=1.0, own_sidecar=False
    )
    result = replicas.run(spec, settings, Console(quiet=True))
    delay = result["propagation"]
    void = sum(delay["void"].values())
    assert delay["measured"] + void + delay["unseen_within_timeout"] == 2
    assert delay["measured"] == len(delay["delays_s"])
    if delay["measured"]:
        assert delay["delay_max_s"] == max(delay["delays_s"]) and delay["delay_p50_s"] > 0
    cost = result["shared_state_cost"]
    assert [(r["round"], r["mode"]) for r in cost["rounds"]] == [(1, "shared"), (1, "single")]
    for figures in cost["rounds"]:
        assert figures["retrieves"] > 0 and figures["observe_recorded"] == figures["observe_events"]
    shared, single = cost["modes"]["shared"], cost["modes"]["single"]
    assert cost["shared_over_single"]["retrieves_per_s"] == pytest.approx(
        shared["retrieves_per_s"] / single["retrieves_per_s"], abs=1e-3
    )
    assert [t["orchestrators"] for t in result["throughput"]] == [1, 2, 3]
    assert all(t["retrieves"] > 0 and t["p95_ms"] >= t["p50_ms"] for t in result["throughput"])
