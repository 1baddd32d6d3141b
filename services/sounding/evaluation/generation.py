"""`sounding eval generation`: what sharing a prompt's prefill saves when k sampled answers to one
prompt decode together, as the `llm` inquiry domain samples k answers per state.

Protocol (fixed before the first run). The bundled generator runs in process with the
deployment's batching settings. For each prompt length L, every round runs two conditions, in an
order that alternates from round to round, each as k concurrent sampled requests (the normal
regime's temperature and top_p, `NEW_TOKENS` new tokens at most):
- `shared`: k requests of one prompt, whose rows share its prefill;
- `distinct`: k requests of k different prompts of the same length, each prefilled on its own, as
  every row of a repeated prompt was before prefills were shared.
A prompt is the demo corpus's text, repeated to length, starting at an offset of its own (so the
prompts differ from their first token on). Reported per L: each condition's median wall time
over the rounds, the median of the rounds' ratios distinct / shared, and the prompts' token counts
after the chat template. Wall-clock seconds on a shared machine: the ratio within a round is the
figure to read."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from sounding.config import Settings

NEW_TOKENS = 16
TEMPERATURE, TOP_P = 0.7, 0.95
OFFSET_STEP = 37


def corpus_tokens(tokenizer, corpus: Path) -> list[int]:
    """The corpus's texts, one after another, as token ids."""
    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines() if line.strip()]
    return list(tokenizer(" ".join(texts), add_special_tokens=False)["input_ids"])


def prompt_texts(tokenizer, tokens: Sequence[int], length: int, count: int) -> list[str]:
    """`count` different texts of `length` tokens: the token stream, cycled, from offsets
    `OFFSET_STEP` apart."""
    texts = []
    for i in range(count):
        start = i * OFFSET_STEP
        ids = [tokens[(start + j) % len(tokens)] for j in range(length)]
        texts.append(tokenizer.decode(ids))
    return texts


def _messages(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{text}\n\nIn one sentence, what is this about?"}]


def run(
    settings: Settings, corpus: Path, lengths: Sequence[int], samples: int, rounds: int, console: Console
) -> dict:
    from transformers import AutoTokenizer

    from sounding.models.generators import GenerationParams, LocalGenerator, converted_smollm2
    from sounding.models.server import select_device

    config = settings.models.generator
    generator = LocalGenerator(
        settings.models.cache_dir,
        select_device(settings.models.device),
        config.max_batch_size,
        config.max_wait_ms,
        max_prompt_tokens=max(lengths) + 256,
        max_batch_prompt_tokens=config.max_batch_prompt_tokens,
    )
    tokenizer = AutoTokenizer.from_pretrained(converted_smollm2(settings.models.cache_dir))
    tokens = corpus_tokens(tokenizer, corpus)
    params = GenerationParams(max_new_tokens=NEW_TOKENS, temperature=TEMPERATURE, top_p=TOP_P)

    async def timed(texts: list[str]) -> float:
        async def one(text: str) -> None:
            async for _ in generator.stream(_messages(text), params, flow="eval"):
                pass

        began = time.perf_counter()
        await asyncio.gather(*(one(t) for t in texts))
        return time.perf_counter() - began

    def prompt_tokens(text: str) -> int:
        prompt = tokenizer.apply_chat_template(_messages(text), add_generation_prompt=True, return_dict=True)
        return len(prompt["input_ids"])

    async def measure() -> list[dict]:
        results = []
        for length in lengths:
            texts = prompt_texts(tokenizer, tokens, length, samples)
            conditions = {"shared": [texts[0]] * samples, "distinct": texts}
            seconds: dict[str, list[float]] = {"shared": [], "distinct": []}
            for r in range(rounds):
                for name in ("shared", "distinct") if r % 2 == 0 else ("distinct", "shared"):
                    seconds[name].append(await timed(conditions[name]))
                console.print(
                    f"L={length} round {r + 1}/{rounds}: shared {seconds['shared'][-1]:.2f} s, "
                    f"distinct {seconds['distinct'][-1]:.2f} s"
                )
            ratios = [d / s for d, s in zip(seconds["distinct"], seconds["shared"], strict=True)]
            results.append(
                {
                    "prompt_text_tokens": length,
                    "prompt_tokens_after_template": sorted({prompt_tokens(t) for t in texts}),
                    "seconds": {name: [round(x, 3) for x in v] for name, v in seconds.items()},
                    "median_seconds": {name: round(statistics.median(v), 3) for name, v in seconds.items()},
                    "median_ratio_distinct_over_shared": round(statistics.median(ratios), 3),
                    "ratios": [round(x, 3) for x in ratios],
                }
            )
        return results

    results = asyncio.run(measure())
    return {
        "protocol": __doc__,
        "generator": generator.model_name,
        "samples": samples,
        "rounds": rounds,
        "new_tokens": NEW_TOKENS,
        "temperature": TEMPERATURE,
        "top_p": TOP_P,
        "corpus": str(corpus),
        "lengths": results,
    }
