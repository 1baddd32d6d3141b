"""`sounding demo` on a machine without the trained NLI model: the corpus step trains it in view,
a progress line at least every 10 s, with nothing but Sounding's own lines in the terminal."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sounding.settings.config import ModelsSettings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STEPS = 20
# What transformers (its load report, its bars), LanceDB or Python warnings would print.
NOISE = (
    "LOAD REPORT",
    "MISSING",
    "Loading",
    "Writing",
    "Warning",
    "WARN",
    "warning",
    "Deprecat",
    "transformers",
)


def test_the_corpus_step_trains_the_nli_model_in_view_and_the_terminal_stays_quiet(tmp_path):
    cache = tmp_path / "models"
    cache.mkdir()
    shared = ModelsSettings().cache_dir  # the converted embedder and generator, not the NLI model
    for converted in ("onnx", "smollm2-135m-instruct"):
        if (shared / converted).exists():
            (cache / converted).symlink_to(shared / converted)
    env = {
        **os.environ,
        "SOUNDING_DATA_DIR": str(tmp_path / "data"),
        "SOUNDING_MODELS__CACHE_DIR": str(cache),
        "SOUNDING_MODELS__NLI__TRAIN_STEPS": str(STEPS),
    }
    demo = subprocess.run(
        [sys.executable, "-m", "sounding.cli", "demo", "--only", "corpus"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    output = demo.stdout + demo.stderr
    assert demo.returncode == 0, output
    assert "First use on this machine: training the NLI model" in output
    progress = [line for line in output.splitlines() if line.startswith("training the NLI model: step")]
    assert progress and progress[-1].startswith(f"training the NLI model: step {STEPS}/{STEPS}, loss ")
    stamps = [_seconds(line) for line in progress]
    assert all(later - earlier <= 10 for earlier, later in zip([0, *stamps], stamps, strict=False)), progress
    assert re.search(r"^answer \S+ with confidence", demo.stdout, re.MULTILINE), demo.stdout
    assert not [line for line in output.splitlines() if any(word in line for word in NOISE)], output
    assert (cache / "nli-minilm-snli" / "training.json").exists()
    assert not Path(str(cache / "nli-minilm-snli") + ".checkpoint").exists()


def _seconds(line: str) -> int:
    """The time so far a progress line states ("… 1 min 5 s so far …")."""
    found = re.search(r"; (?:(\d+) min )?(\d+) s so far", line)
    assert found, line
    return int(found.group(1) or 0) * 60 + int(found.group(2))
