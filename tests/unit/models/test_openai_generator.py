"""The OpenAI-compatible generator against a local HTTP server speaking the streaming protocol."""

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sounding.models.generators import GenerationParams, OpenAIGenerator
from sounding.runtime import errors
from sounding.settings.config import GeneratorSettings

pytest.importorskip("httpx")  # the [models] extra

pytestmark = pytest.mark.unit


class Endpoint(BaseHTTPRequestHandler):
    requests: list[dict] = []
    status = 200
    error_body = b'{"error": "overloaded"}'

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Endpoint.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if Endpoint.status != 200:
            self.send_response(Endpoint.status)
            self.end_headers()
            self.wfile.write(Endpoint.error_body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece, finish in (("Par", None), ("is", None), ("", "stop")):
            chunk = {"choices": [{"delta": {"content": piece}, "finish_reason": finish}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Endpoint.requests, Endpoint.status, Endpoint.error_body = [], 200, b'{"error": "overloaded"}'
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _generate(base_url, **params):
    generator = OpenAIGenerator(
        GeneratorSettings(backend="openai", openai_base_url=base_url, openai_model="m", openai_api_key="k")
    )

    async def run():
        return [
            p
            async for p in generator.stream(
                [{"role": "user", "content": "capital of France?"}], GenerationParams(**params)
            )
        ]

    return asyncio.run(run())


def test_streams_pieces_and_sends_the_request_parameters(endpoint):
    pieces = _generate(endpoint, max_new_tokens=7, temperature=0.5, seed=3, stop=("\n",))
    assert [p.text for p in pieces] == ["Par", "is", ""]
    assert pieces[-1].finish_reason == "stop"
    sent = Endpoint.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer k"
    assert (sent["model"], sent["max_tokens"], sent["temperature"], sent["seed"], sent["stop"]) == (
        "m",
        7,
        0.5,
        3,
        ["\n"],
    )
    assert sent["stream"] is True


def test_an_error_status_or_no_server_is_unavailable(endpoint):
    Endpoint.status = 503
    with pytest.raises(errors.Unavailable, match="503"):
        _generate(endpoint)
    with pytest.raises(errors.Unavailable):
        _generate("http://127.0.0.1:9/v1")


def test_an_error_answer_passes_on_its_status_and_reason_never_its_text(endpoint):
    Endpoint.status = 401
    Endpoint.error_body = json.dumps(
        {
            "error": {
                "message": "Incorrect API key provided: sk-live-1234abcd",
                "type": "invalid_request_error",
            }
        }
    ).encode()
    with pytest.raises(errors.Unavailable) as refused:
        _generate(endpoint)
    assert refused.value.message == "generator endpoint answered 401 (invalid_request_error)"
    Endpoint.error_body = b"<html>key sk-live-1234abcd is not valid</html>"
    with pytest.raises(errors.Unavailable) as refused:
        _generate(endpoint)
    assert refused.value.message == "generator endpoint answered 401"
