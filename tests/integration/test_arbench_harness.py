"""`sounding eval arbench` as a user runs it, on a guessing-number episode against the live stack:
it plays it to its end, judges every stop rule on it and writes its JSON, with its provenance,
where `--out` says (issue 48, item 2)."""

import json

import pytest
from sounding.cli import with_plugins
from sounding.core.stop_rules import STOP_RULES
from typer.testing import CliRunner

pytestmark = pytest.mark.integration


def test_the_arbench_command_plays_an_episode_and_writes_its_json(stack, tmp_path, monkeypatch):
    monkeypatch.setenv("SOUNDING_MODELS__ADDRESS", stack.settings.models.address)
    data = tmp_path / "gn.json"
    data.write_text(json.dumps(["8214", "0435", "9170"]))
    out = tmp_path / "arbench.json"
    command = ["eval", "arbench", "--task", "gn", "--data", str(data), "--limit", "1"]
    command += ["--max-turns", "1", "--samples", "2", "--answer-tokens", "12", "--question-tokens", "24"]
    command += ["--out", str(out), "--address", stack.settings.address]
    ran = CliRunner().invoke(with_plugins(), command)
    assert ran.exit_code == 0, ran.output
    result = json.loads(out.read_text())
    assert {"commit", "date", "seed", "settings"} <= result["provenance"].keys()
    assert {"own": False, "address": stack.settings.address} in result["provenance"]["stacks"]
    assert result["episodes"] == 1 and result["outcomes_recorded_through_observe"] == 1
    assert set(STOP_RULES) <= set(result["rules"])
    for rule in STOP_RULES:  # one question at most, then the answer is forced
        assert 0 <= result["rules"][rule]["mean_questions"] <= 1
    assert all(v is None or isinstance(v, float) for v in result["homogeneity_mean"].values())
    assert any(isinstance(v, float) for v in result["homogeneity_mean"].values())
    assert [t["session_id"] for t in result["trajectories"]] != []
    assert not out.with_name(out.name + ".journal.jsonl").exists()  # the journal goes once written
