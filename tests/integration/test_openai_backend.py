"""The generator's openai backend against a real OpenAI-compatible server: `transformers serve`
with the same SmolLM2 weights, congruent with the sidecar's local backend."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sounding.models.client import ModelsClient
from sounding.models.local_generator import converted_smollm2
from sounding.runtime import errors
from sounding.settings.config import ModelsSettings, Settings
from sounding.stack import Stack

from .conftest import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Which planet is known as the red planet?"},
]


def served_model(tmp: Path) -> Path:
    """The converted SmolLM2 (linked, not copied) with a generation config that samples unless the
    request's temperature is 0, as OpenAI's API does (`transformers serve` samples only when the
    model's config says so)."""
    source = converted_smollm2(ModelsSettings().cache_dir)
    served = tmp / "smollm2-sampling"
    served.mkdir()
    for item in source.iterdir():
        if item.name != "generation_config.json":
            (served / item.name).symlink_to(item)
    config = json.loads((source / "generation_config.json").read_text())
    (served / "generation_config.json").write_text(json.dumps({**config, "do_sample": True}))
    return served


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    """`transformers serve` on a free port (one request at a time: its continuous batching keeps
    the first request's sampling settings for all); its base URL, model and process."""
    tmp = tmp_path_factory.mktemp("endpoint")
    model_dir = served_model(tmp)
    port = free_port()
    log = (tmp / "serve.log").open("w")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "transformers"), "serve", str(model_dir)]
        + ["--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        start_new_session=True,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        assert server.poll() is None, "transformers serve exited"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "transformers serve did not come up"
        time.sleep(0.5)
    yield base_url, str(model_dir), server
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    log.close()


@pytest.fixture(scope="module")
def openai_sidecar(endpoint, tmp_path_factory):
    base_url, model, _ = endpoint
    data_dir = tmp_path_factory.mktemp("openai-sidecar")
    settings = Settings(data_dir=data_dir, models=ModelsSettings(address=f"127.0.0.1:{free_port()}"))
    env = {
        "SOUNDING_MODELS__GENERATOR__BACKEND": "openai",
        "SOUNDING_MODELS__GENERATOR__OPENAI_BASE_URL": base_url,
        "SOUNDING_MODELS__GENERATOR__OPENAI_MODEL": model,
    }
    sidecar = Stack(settings, env=env, log_dir=data_dir / "logs")
    sidecar.start_models()
    yield sidecar.settings.models.address
    sidecar.stop()


def generate(address: str, **options) -> tuple[str, str]:
    async def run():
        models = ModelsClient(address)
        try:
            pieces = [p async for p in models.generate(MESSAGES, timeout=300, **options)]
            return "".join(p.text for p in pieces), pieces[-1].finish_reason
        finally:
            await models.close()

    return asyncio.run(run())


def test_greedy_text_through_the_endpoint_is_the_local_backends(openai_sidecar, stack):
    through_endpoint = generate(openai_sidecar, max_new_tokens=12)
    local = generate(stack.settings.models.address, max_new_tokens=12)
    assert through_endpoint[0].strip(), "the endpoint streamed text"
    assert through_endpoint == local


def test_sampled_requests_sample(openai_sidecar):
    texts = {generate(openai_sidecar, max_new_tokens=12, temperature=1.0, top_p=1.0)[0] for _ in range(4)}
    assert len(texts) >= 2, texts


def test_an_endpoint_that_is_gone_is_unavailable_naming_it(openai_sidecar, endpoint):
    _, _, server = endpoint
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=30)
    with pytest.raises(errors.Unavailable, match="generator endpoint unreachable: ConnectError"):
        generate(openai_sidecar, max_new_tokens=4)
