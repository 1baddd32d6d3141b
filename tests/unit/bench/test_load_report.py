import pytest
from sounding_bench import load_report

pytestmark = pytest.mark.unit

MIB = 2**20


def test_memory_is_judged_per_process_life_from_its_first_minute():
    samples = [{"t": t, "orchestrator 10": (100 + t // 60) * MIB} for t in range(0, 300, 5)]
    # the sidecar restarts at 150 s as another process: its series starts over
    for row in samples:
        if row["t"] < 150:
            row["sidecar 20"] = 50 * MIB
        else:
            row["sidecar 21"] = (60 + (row["t"] > 240)) * MIB
    summary = load_report.memory_summary(samples)
    assert summary["orchestrator 10"] == {
        "mib_after_first_minute": 101.0,
        "mib_peak_after": 104.0,
        "ratio": 1.03,
    }
    assert summary["sidecar 20"]["ratio"] == 1.0
    assert summary["sidecar 21"] == {"mib_after_first_minute": 60.0, "mib_peak_after": 61.0, "ratio": 1.017}


def test_a_process_that_lived_less_than_a_minute_is_not_judged():
    assert load_report.memory_summary([{"t": t, "worker 7": MIB} for t in range(0, 55, 5)]) == {}


def test_percentiles_in_milliseconds():
    result = load_report.percentiles([0.001 * i for i in range(1, 101)])
    assert result == {"count": 100, "p50_ms": 50.5, "p99_ms": 99.0, "max_ms": 100.0}
    assert load_report.percentiles([]) == {"count": 0}


def test_a_failure_just_after_a_kill_counts_as_disrupted_whatever_the_report_rounds():
    kill_at = 1000.16  # reported as at_s 8.2 after a start at 992.0; the failure ends at 8.19
    spans = [(kill_at, kill_at + 10.0)]
    outcomes = [
        (kill_at + 0.03, "Retrieve", "UNAVAILABLE"),
        (kill_at - 0.01, "Retrieve", "UNAVAILABLE"),  # before the kill: an error
        (kill_at + 10.5, "Observe", "INTERNAL"),  # after the window: an error
        (kill_at + 1.0, "Retrieve", "OK"),
    ]
    outside, within = load_report.tally_failures(outcomes, spans)
    assert within == {("Retrieve", "UNAVAILABLE"): 1}
    assert outside == {("Retrieve", "UNAVAILABLE"): 1, ("Observe", "INTERNAL"): 1}
