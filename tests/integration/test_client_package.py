"""The Python client stands alone: installed into an empty virtual environment it brings only
gRPC and protobuf, and talks to the running stack."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parents[2] / "clients"
SERVER_PACKAGES = ("sounding", "torch", "ray", "lancedb", "numpy")


def test_the_client_installs_alone_and_retrieves_from_the_stack(stack, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        + [str(CLIENTS / "python-api"), str(CLIENTS / "python")],
        check=True,
        capture_output=True,
        timeout=600,
    )
    script = textwrap.dedent(
        f"""
        import importlib.util, json
        from sounding_client import Client
        absent = [p for p in {SERVER_PACKAGES!r} if importlib.util.find_spec(p) is None]
        with Client({stack.settings.address!r}, timeout=60) as client:
            client.create_collection("standalone-client")
            list(client.ingest("standalone-client", [
                {{"id": "tide", "text": "Tides rise and fall twice a day under the pull of the moon."}},
                {{"id": "lead", "text": "A leadsman casts a weighted line to measure the depth."}},
            ]))
            final = client.retrieve_final("standalone-client", "how is the depth measured", top_k=1)
        print(json.dumps({{"absent": absent, "hit": final.hits[0].document_id}}))
        """
    )
    ran = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == (
        '{"absent": ["sounding", "torch", "ray", "lancedb", "numpy"], "hit": "lead"}'
    )
