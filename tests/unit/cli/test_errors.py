import json
import subprocess
import sys

import grpc
import pytest
from sounding.cli import describe
from sounding_client import SoundingError
from sounding_client.types import FieldViolation

pytestmark = pytest.mark.unit


def test_a_failed_call_is_one_line_with_its_code_and_field_violations():
    error = SoundingError(
        grpc.StatusCode.INVALID_ARGUMENT,
        "top_k must be between 1 and 1000",
        "INVALID_ARGUMENT",
        [FieldViolation("top_k", "must be between 1 and 1000")],
    )
    assert describe(error) == (
        "INVALID_ARGUMENT: top_k must be between 1 and 1000 (top_k: must be between 1 and 1000)"
    )


def test_other_errors_name_their_type_unless_they_are_the_environments():
    assert describe(ValueError("bad\nvalue")) == "ValueError: bad value"
    assert describe(FileNotFoundError(2, "No such file", "x.json")) == "[Errno 2] No such file: 'x.json'"


def test_the_command_prints_one_line_and_exits_1_and_debug_shows_the_traceback(tmp_path):
    missing = tmp_path / "absent.jsonl"
    command = [sys.executable, "-m", "sounding.cli", "collections", "--address", "127.0.0.1:1"]
    failed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert failed.stderr.startswith("error: UNAVAILABLE: ") and failed.stderr.count("\n") == 1
    debug = subprocess.run(
        [command[0], *command[1:3], "--debug", *command[3:]], capture_output=True, text=True, timeout=60
    )
    assert debug.returncode == 1 and "Traceback" in debug.stderr
    usage = subprocess.run([*command[:3], "ingest", str(missing), "-c", "x"], capture_output=True, text=True)
    assert usage.returncode == 2 and "does not exist" in usage.stderr


def test_version():
    shown = subprocess.run(
        [sys.executable, "-m", "sounding.cli", "--version"], capture_output=True, text=True
    )
    assert shown.returncode == 0 and shown.stdout.startswith("sounding ")


def test_arbench_refuses_episode_level_calibration_before_starting_anything(tmp_path):
    data = tmp_path / "gn.json"
    data.write_text("[]")
    command = [sys.executable, "-m", "sounding.cli", "eval", "arbench", "--task", "gn", "--data", str(data)]
    refused = subprocess.run(
        [*command, "--ablate", "dpp", "--ablate", "episode_tau", "--out", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "--one-state-per-session" in refused.stderr
    assert not (tmp_path / "r.json").exists()


def test_arbench_compare_refuses_a_file_that_is_no_arbench_result(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"task": "gn"}))
    command = [sys.executable, "-m", "sounding.cli", "eval", "arbench-compare", str(other)]
    refused = subprocess.run(
        [*command, "--out", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2 and "not a `sounding eval arbench` result" in refused.stderr
    assert not (tmp_path / "r.json").exists()
