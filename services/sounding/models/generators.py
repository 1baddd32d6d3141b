"""Text generators behind `Generate`: the bundled SmolLM2 (`models.local_generator`) or any
OpenAI-compatible endpoint.

Both stream text pieces as an async iterator and stop promptly when the caller goes away.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sounding.runtime.errors import Unavailable
from sounding.settings.config import GeneratorSettings


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: Sequence[str] = field(default_factory=tuple)
    # A cached generation is served only to requests of the same scope.
    cache_scope: str = ""


@dataclass
class Piece:
    text: str
    finish_reason: str = ""
    # On a generation served from the cache: how long decoding it took when it was produced.
    cached_decode_ms: float = 0.0


class Generator(Protocol):
    model_name: str

    def stream(
        self, messages: Sequence[dict[str, str]], params: GenerationParams, flow: str = ""
    ) -> AsyncIterator[Piece]:
        """The generation's pieces; `flow` names the caller's flow of requests (a Retrieve, an
        inquiry session), which queues fairly against the others."""
        ...


# An OpenAI-style error body's `error.type` or `error.code`, when it is a short identifier.
_REASON = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def upstream_reason(body: bytes) -> str:
    """What an error answer of the generator endpoint may pass on to callers: the error's type or
    code (" (invalid_api_key)") when its body is OpenAI-style JSON naming one, else nothing. The
    rest of the body stays out of every error and log: it may quote the request's credentials
    (a 401 naming the API key), and any tenant's caller sees the error."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(error, dict):
        return ""
    for key in ("type", "code"):
        value = error.get(key)
        if isinstance(value, str) and _REASON.match(value):
            return f" ({value})"
    return ""


def first_stop(text: str, stops: Sequence[str]) -> int | None:
    positions = [text.find(s) for s in stops if s and s in text]
    return min(positions) if positions else None


class OpenAIGenerator:
    """Any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp server), streamed."""

    def __init__(self, settings: GeneratorSettings):
        import httpx

        self.model_name = settings.openai_model
        key = settings.api_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(
            base_url=settings.openai_base_url.rstrip("/"),
            headers=headers,
            timeout=settings.request_timeout_s,
        )

    async def stream(
        self, messages: Sequence[dict[str, str]], params: GenerationParams, flow: str = ""
    ) -> AsyncIterator[Piece]:
        import httpx

        body: dict[str, object] = {
            "model": self.model_name,
            "messages": list(messages),
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stream": True,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        try:
            async with self._client.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code != 200:
                    reason = upstream_reason(await response.aread())
                    raise Unavailable(f"generator endpoint answered {response.status_code}{reason}")
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[len("data:") :].strip()
                    if data == "[DONE]":
                        return
                    choice = json.loads(data)["choices"][0]
                    text = (choice.get("delta") or {}).get("content") or ""
                    finish = choice.get("finish_reason") or ""
                    if text or finish:
                        yield Piece(text, finish)
        except httpx.HTTPError as error:
            # A timeout's message is empty: name the error's kind too.
            reason = f"{type(error).__name__} {error}".rstrip()
            raise Unavailable(f"generator endpoint unreachable: {reason}") from error
