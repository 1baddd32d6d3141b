"""Sounding without extras: `pip install .` brings no torch, Ray, matplotlib, bm25s or benchmark
code, the command line works without `sounding eval` (the benchmark wing, sounding-bench, adds it),
and each process role names the extra it needs instead of failing on an import."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXTRA_PACKAGES = ("torch", "transformers", "ray", "matplotlib", "bm25s", "hypothesis", "sounding_bench")


def test_the_base_install_has_no_extras_and_each_role_names_its_own(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python, sounding = str(venv / "bin" / "python"), str(venv / "bin" / "sounding")
    installed = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", "constraints.txt"]
        + [str(ROOT / "clients" / "python-api"), str(ROOT / "clients" / "python"), str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    probe = textwrap.dedent(
        f"""
        import importlib.util
        print(",".join(p for p in {EXTRA_PACKAGES!r} if importlib.util.find_spec(p) is not None))
        """
    )
    present = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
    assert present.stdout.strip() == ""
    helped = subprocess.run([sounding, "--help"], capture_output=True, text=True)
    assert helped.returncode == 0
    assert " eval " not in helped.stdout and " calibrate " in helped.stdout, helped.stdout

    env = {"PATH": str(venv / "bin"), "HOME": str(tmp_path), "SOUNDING_DATA_DIR": str(tmp_path / "data")}
    for command, extra in (
        (["serve"], "[workers]"),
        (["serve", "models"], "[models]"),
        (["calibrate", "miss_rate", "--plot", str(tmp_path / "fit.png")], "[plot]"),
    ):
        ran = subprocess.run([sounding, *command], capture_output=True, text=True, env=env, timeout=120)
        assert ran.returncode == 1, (command, ran.stdout, ran.stderr)
        (line,) = ran.stderr.splitlines()
        assert line.startswith("error: ") and f"needs the {extra} extra" in line, line
        assert f"pip install 'sounding{extra}'" in line, line
