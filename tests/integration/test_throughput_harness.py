"""`sounding eval throughput` on a tiny BEIR directory against the live stack: every system answers
at every level, the encoder is measured at every batch size, and the result says which stack it
measured; the selector's cold-start phase plans, observes and reports each of its queries. Each
level runs on a clock that moves with the harness's own reads (a fixed number of
calls per client), so what the test sees does not depend on the machine's speed."""

import itertools
import json
import threading

import pytest
from rich.console import Console
from sounding_bench import throughput

from .conftest import write_tiny_corpus

pytestmark = pytest.mark.integration


def write_beir(path):
    write_tiny_corpus(path)
    queries = {"q1": "how do ships measure water depth", "q2": "how does the moon pull the tides"}
    (path / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": q, "text": t}) for q, t in queries.items()) + "\n"
    )
    (path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tsonar\t1\nq2\ttide\t1\n")


def test_every_system_answers_at_every_level_beside_the_hardware_limit(stack, tmp_path):
    data = tmp_path / "tinybeir"
    write_beir(data)
    reads, lock = itertools.count(), threading.Lock()

    def clock() -> float:
        with lock:
            return float(next(reads))

    settings = stack.settings.model_copy(update={"data_dir": tmp_path / "harness"})
    spec = throughput.ThroughputRun(
        data, "test", levels=(1, 2), seconds=6.0, address=stack.settings.address, cold_start_queries=3
    )
    result = throughput.run(spec, settings, Console(quiet=True), clock=clock)
    assert result["stack"] == {"own": False, "address": stack.settings.address}
    assert set(result["levels"]) == {"1", "2"}
    for level in result["levels"].values():
        assert set(level) == set(throughput.SYSTEMS)
        for system, figures in level.items():
            assert figures["failures"] == {} and figures["answered"] >= 1, (system, figures)
    encoder = result["limit"]["encoder"]
    assert set(encoder["per_batch"]) == {str(b) for b in throughput.ENCODER_BATCHES}
    assert all(rate > 0 for rate in encoder["per_batch"].values())
    assert result["limit"]["qps"] > 0 and result["limit"]["search_ms_p50"] > 0
    assert set(result["ratios"]["2"]) == {
        "default_over_hybrid",
        "default_over_loop_off",
        "loop_off_over_limit",
    }
    assert throughput.plot(result).startswith(b"\x89PNG")
    selector = result["selector_cold_start"]
    assert [q["query_id"] for q in selector["per_query"]] == ["q1", "q2", "q1"]
    assert sum(selector["modes"].values()) == 3 and selector["cold_start"]["no_arms"]["queries"] == 3
    assert all(q["arms"] and q["latency_ms"] > 0 and q["dense_lexical_ms"] > 0 for q in selector["per_query"])
    assert {"dense", "lexical"} <= {a["arm"] for a in selector["arm_statistics"]}
