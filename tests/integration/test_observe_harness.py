"""`sounding eval observe` on a tiny BEIR directory against the live stack: every retrieval's
outcome and every tool use goes through one stream each, all are recorded, and the figures are
the stream's own."""

import pytest
from rich.console import Console
from sounding_bench import observe

from .test_throughput_harness import write_beir

pytestmark = pytest.mark.integration


def test_one_stream_of_outcomes_and_streams_of_tool_uses_are_recorded_and_timed(stack, tmp_path):
    data = tmp_path / "tinybeir"
    write_beir(data)
    settings = stack.settings.model_copy(update={"data_dir": tmp_path / "harness"})
    spec = observe.ObserveRun(data, "test", retrievals=12, tool_streams=2, address=stack.settings.address)
    result = observe.run(spec, settings, Console(quiet=True))
    assert result["stack"] == {"own": False, "address": stack.settings.address}
    outcomes = result["retrieval_outcomes"]
    assert outcomes["events"] == outcomes["recorded"] == 12 and outcomes["rejected"] == {}
    # The rate as its seconds give it, up to its rounding to 0.1 event/s.
    assert outcomes["events_per_s"] == pytest.approx(12 / outcomes["seconds"], rel=0.01, abs=0.05)
    assert [s["recorded"] for s in result["tool_uses"]] == [12, 12]
    assert all(s["rejected"] == {} and s["events_per_s"] > 0 for s in result["tool_uses"])
