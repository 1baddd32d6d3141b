import json

import pytest
from sounding.settings.config import Settings
from sounding_bench.cli.common import write_result

pytestmark = pytest.mark.unit


def test_a_result_is_led_by_how_to_reproduce_it_and_its_diagram_lies_beside_it(tmp_path):
    out = tmp_path / "results" / "run.json"
    write_result({"figure": 0.5}, out, Settings(data_dir=tmp_path), seed=7, plot=b"\x89PNG...")
    written = json.loads(out.read_text())
    assert list(written) == ["provenance", "figure"] and written["figure"] == 0.5
    provenance = written["provenance"]
    assert provenance["seed"] == 7 and provenance["command"].startswith("sounding")
    assert len(provenance["commit"].removesuffix("-dirty")) == 40
    assert provenance["settings"]["data_dir"] == str(tmp_path)
    assert provenance["models"]["embedder"] == "all-MiniLM-L6-v2"
    assert out.with_suffix(".png").read_bytes() == b"\x89PNG..."


def test_without_a_diagram_no_png_is_written(tmp_path):
    out = tmp_path / "run.json"
    write_result({}, out, Settings(data_dir=tmp_path))
    assert out.exists() and not out.with_suffix(".png").exists()


def test_the_provenance_names_the_commit_the_run_started_at(tmp_path, monkeypatch):
    from sounding_bench import harness

    monkeypatch.setattr(harness, "_started", {})
    monkeypatch.setattr(harness, "_commit", lambda: "a" * 40)
    harness.note_start()
    harness.note_start()  # the first call counts
    monkeypatch.setattr(harness, "_commit", lambda: "b" * 40 + "-dirty")
    provenance = harness.provenance(Settings(data_dir=tmp_path))
    assert provenance["commit"] == "a" * 40 and provenance["commit_at_write"] == "b" * 40 + "-dirty"
    assert provenance["started"] <= provenance["date"]
