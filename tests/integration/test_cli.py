import os
import signal
import subprocess
import sys
import time

import pytest
from sounding.settings.config import ModelsSettings, Settings, TlsSettings
from sounding.stack import self_check, wait_serving

from .conftest import DEMO_CORPUS, free_port, self_signed_certificate, tls_environment

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_up_over_tls_without_a_ca_file_ingest_retrieve_and_a_clean_ctrl_c(tmp_path):
    # A self-signed certificate and no CA file: `up` checks its own port with that certificate.
    cert_file, key_file = self_signed_certificate(tmp_path)
    tls = TlsSettings(cert_file=cert_file, key_file=key_file)
    settings = Settings(
        data_dir=tmp_path / "data",
        address=f"localhost:{free_port()}",
        models=ModelsSettings(address=f"127.0.0.1:{free_port()}"),
        tls=tls,
    )
    env = {
        **os.environ,
        "SOUNDING_DATA_DIR": str(settings.data_dir),
        "SOUNDING_ADDRESS": settings.address,
        "SOUNDING_MODELS__ADDRESS": settings.models.address,
        **tls_environment("SOUNDING_TLS__", tls),
    }
    cli = [sys.executable, "-m", "sounding.cli"]
    up = subprocess.Popen([*cli, "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    credentials, options = self_check(tls)
    try:
        wait_serving(settings.address, 600, up, credentials, options=options)
        ingest = subprocess.run(
            [*cli, "ingest", str(DEMO_CORPUS), "-c", "demo", "--tls-ca", str(cert_file)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert ingest.returncode == 0, ingest.stdout + ingest.stderr
        assert "12 documents" in ingest.stdout
        retrieve = subprocess.run(
            [*cli, "retrieve", "leadsman tallow", "-c", "demo", "-k", "2", "--tls-ca", str(cert_file)],
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
            [*cli, "retrieve", "x", "-c", "nope", "--tls-ca", str(cert_file)],
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
    # Sounding's own lines only: the processes' output (Ray's notices, library warnings) is in the logs.
    printed = output.decode()
    assert f"orchestrator serving on {settings.address}" in printed
    assert not any(word in printed for word in ("WARN", "Warning", "warning", "Ray")), printed
    assert (settings.data_dir / "logs" / "orchestrator.log").stat().st_size > 0
    time.sleep(0.5)
    with pytest.raises(TimeoutError):
        wait_serving(settings.address, 1.0, credentials=credentials, options=options)
    with pytest.raises(TimeoutError):
        wait_serving(settings.models.address, 1.0)
