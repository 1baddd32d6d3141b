"""`sounding eval generation`: what sharing prefills saves when an inquiry state's k generations
decode together: k sampled answers to one prompt, or k revision prompts that repeat one context.

Protocol (fixed before the first run). The bundled generator runs in process with the
deployment's batching settings. For each prompt length L, every round runs three conditions, in
an order that rotates from round to round, each as k concurrent sampled requests (the normal
regime's temperature and top_p, `NEW_TOKENS` new tokens at most):
- `shared`: k requests of one prompt (its prefill is shared by all k rows);
- `prefix`: k prompts of one L-token text, each ending in a different question (the text is
  encoded once, each question on its own);
- `distinct`: k prompts of k different L-token texts, ending in one question (nothing but the
  chat template's opening to share: every row of a repeated prompt cost this before prefills
  were shared).
A text is the demo corpus's text, repeated to length, starting at an offset of its own (so the
texts differ from their first token on). Reported per L: each condition's median wall time over
the rounds, the medians of the rounds' ratios distinct / shared and distinct / prefix, and the
prompts' token counts after the chat template. Wall-clock seconds on a shared machine: the
ratios within a round are the figures to read."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from sounding.settings.config import Settings

from sounding_bench.harness import DEMO_CORPUS

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


QUESTIONS = (
    "In one sentence, what is this about?",
    "Which instrument is named first?",
    "What did sailors fear most?",
    "Give the text a title.",
    "Which word comes up most often?",
    "Who would read this?",
    "What is the oldest method described?",
    "Name one number in the text.",
)


def _messages(text: str, question: str = QUESTIONS[0]) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{text}\n\n{question}"}]


@dataclass(frozen=True)
class GenerationRun:
    """What a run times: the prompt lengths in tokens, the concurrent requests per condition (a
    state's k) and the rounds per length."""

    lengths: tuple[int, ...]
    samples: int
    rounds: int


def run(spec: GenerationRun, settings: Settings, console: Console) -> dict:
    """The result JSON (the protocol above), the generator in this process."""
    from sounding.models.generators import GenerationParams
    from sounding.models.local_generator import LocalGenerator, converted_smollm2
    from sounding.models.server import select_device
    from transformers import AutoTokenizer

    config = settings.models.generator
    generator = LocalGenerator(
        settings.models.cache_dir,
        select_device(settings.models.device),
        config.max_batch_size,
        config.max_wait_ms,
        max_prompt_tokens=max(spec.lengths) + 256,
        max_batch_prompt_tokens=config.max_batch_prompt_tokens,
        max_batch_cache_tokens=config.max_batch_cache_tokens,
    )
    tokenizer = AutoTokenizer.from_pretrained(converted_smollm2(settings.models.cache_dir))
    tokens = corpus_tokens(tokenizer, DEMO_CORPUS)
    params = GenerationParams(max_new_tokens=NEW_TOKENS, temperature=TEMPERATURE, top_p=TOP_P)

    async def timed(prompts: list[list[dict[str, str]]]) -> float:
        async def one(messages: list[dict[str, str]]) -> None:
            async for _ in generator.stream(messages, params, flow="eval"):
                pass

        began = time.perf_counter()
        await asyncio.gather(*(one(m) for m in prompts))
        return time.perf_counter() - began

    def prompt_tokens(messages: list[dict[str, str]]) -> int:
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)
        return len(prompt["input_ids"])

    async def measure() -> list[dict]:
        results = []
        for length in spec.lengths:
            texts = prompt_texts(tokenizer, tokens, length, spec.samples)
            conditions = {
                "shared": [_messages(texts[0])] * spec.samples,
                "prefix": [_messages(texts[0], QUESTIONS[i % len(QUESTIONS)]) for i in range(spec.samples)],
                "distinct": [_messages(t) for t in texts],
            }
            names = list(conditions)
            seconds: dict[str, list[float]] = {name: [] for name in names}
            for r in range(spec.rounds):
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    seconds[name].append(await timed(conditions[name]))
                console.print(
                    f"L={length} round {r + 1}/{spec.rounds}: "
                    + ", ".join(f"{name} {seconds[name][-1]:.2f} s" for name in names)
                )
            ratios = {
                f"distinct_over_{name}": [
                    d / x for d, x in zip(seconds["distinct"], seconds[name], strict=True)
                ]
                for name in ("shared", "prefix")
            }
            results.append(
                {
                    "prompt_text_tokens": length,
                    "prompt_tokens_after_template": {
                        name: sorted({prompt_tokens(m) for m in ms}) for name, ms in conditions.items()
                    },
                    "seconds": {name: [round(x, 3) for x in v] for name, v in seconds.items()},
                    "median_seconds": {name: round(statistics.median(v), 3) for name, v in seconds.items()},
                    "median_ratios": {name: round(statistics.median(v), 3) for name, v in ratios.items()},
                    "ratios": {name: [round(x, 3) for x in v] for name, v in ratios.items()},
                }
            )
        return results

    results = asyncio.run(measure())
    return {
        "protocol": __doc__,
        "generator": generator.model_name,
        "samples": spec.samples,
        "rounds": spec.rounds,
        "new_tokens": NEW_TOKENS,
        "temperature": TEMPERATURE,
        "top_p": TOP_P,
        "corpus": str(DEMO_CORPUS),
        "lengths": results,
    }
