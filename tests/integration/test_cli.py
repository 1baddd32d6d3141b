import os
import signal
import subprocess
import sys
import time

import pytest
from sounding.settings.config import ModelsSettings, Settings
from sounding.stack import wait_serving

from .conftest import DEMO_CORPUS, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_up_ingest_retrieve_and_a_clean_ctrl_c(tmp_path):
    settings = Settings(
        data_dir=tmp_path / "data",
        address=f"127.0.0.1:{free_port()}",
        models=ModelsSettings(address=f"127.0.0.1:{free_port()}"),
    )
    env = {
        **os.environ,
        "SOUNDING_DATA_DIR": str(settings.data_dir),
        "SOUNDING_ADDRESS": settings.address,
        "SOUNDING_MODELS__ADDRESS": settings.models.address,
    }
    cli = [sys.executable, "-m", "sounding.cli"]
    up = subprocess.Popen([*cli, "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_serving(settings.address, 600, up)
        ingest = subprocess.run(
            [*cli, "ingest", str(DEMO_CORPUS), "-c", "demo"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert ingest.returncode == 0, ingest.stdout + ingest.stderr
        assert "12 documents" in ingest.stdout
        retrieve = subprocess.run(
            [*cli, "retrieve", "leadsman tallow", "-c", "demo", "-k", "2"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert retrieve.returncode == 0, retrieve.stdout + retrieve.stderr
        lines = retrieve.stdout.splitlines()
        order = [
            next(i for i, line in enumerate(lines) if line.startswith(word))
            for word in ("plan", "fused", "final")
        ]
        assert order == sorted(order)
        assert "lead-line" in retrieve.stdout
        missing = subprocess.run(
            [*cli, "retrieve", "x", "-c", "nope"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert missing.returncode == 1 and missing.stderr.startswith("error: NOT_FOUND"), missing.stderr
    finally:
        up.send_signal(signal.SIGINT)
        output, _ = up.communicate(timeout=300)
    assert up.returncode == 0, output.decode()
    time.sleep(0.5)
    for address in (settings.address, settings.models.address):
        with pytest.raises(TimeoutError):
            wait_serving(address, 1.0)
