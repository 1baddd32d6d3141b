"""The models sidecar's servicer (Embed, Generate, Entail, Cluster) and its call policies.
Embedding and NLI share one thread (one OpenMP team), each micro-batched. The process that serves
it is wired in `assembly.sidecar`."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sounding.api.sounding.models.v1 import models_pb2
from sounding.core import clustering
from sounding.models.batching import MicroBatcher
from sounding.models.client import FLOW_METADATA_KEY
from sounding.models.embedder import TextEncoder
from sounding.models.generation_cache import CachedGenerator
from sounding.models.generators import GenerationParams, Generator, OpenAIGenerator
from sounding.models.local_generator import LocalGenerator
from sounding.models.nli import TRAINED_DIR, NliModel, ensure_trained
from sounding.runtime import errors
from sounding.serving import rpc
from sounding.settings.config import ModelsSettings
from sounding.settings.limits import DeadlineLimits, ModelsLimits

log = logging.getLogger(__name__)

MODEL_SERVICE = models_pb2.DESCRIPTOR.services_by_name["ModelService"]
# Sampling temperatures: below the minimum the logits overflow (greedy decoding is temperature 0).
MIN_TEMPERATURE = 0.01
MAX_TEMPERATURE = 10.0
MAX_STOP_CHARS = 64
MAX_FLOW_CHARS = 128
MAX_CACHE_SCOPE_CHARS = 64


def select_device(preference: str) -> str:
    import torch

    if preference == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return preference


@dataclass(frozen=True)
class ModelServicerConfig:
    """The models served (which ones, on which device, where converted copies are kept), the
    limits on what one call may ask, and the file that caches greedy generations."""

    models: ModelsSettings
    limits: ModelsLimits
    generation_cache_file: Path


class ModelServicer:
    def __init__(
        self,
        embedder: TextEncoder,
        batcher: MicroBatcher,
        encode_thread: ThreadPoolExecutor,
        config: ModelServicerConfig,
    ):
        self._models = config.models
        self._limits = config.limits
        self._generation_cache_file = config.generation_cache_file
        self._embedder = embedder
        self._batcher = batcher
        self._encode_thread = encode_thread
        self._generator: Generator | None = None
        self._generator_lock = asyncio.Lock()
        self._nli_load: asyncio.Task[tuple[NliModel, MicroBatcher]] | None = None
        self._generations = Admission(self._limits.max_queued_generations, self._limits.max_queued_per_flow)

    async def nli(self) -> tuple[NliModel, MicroBatcher]:
        """The NLI model and its batcher, loaded on first use; Sounding's own model is trained
        first (on a thread of its own, so Embed keeps serving) when no adequate copy is cached.
        One load serves every caller, and a caller that gives up (its deadline) does not stop
        it: the next call finds it done or still under way (or, if it failed, starts another)."""
        load = self._nli_load
        if load is None or (load.done() and (load.cancelled() or load.exception() is not None)):
            load = self._nli_load = asyncio.create_task(self._load_nli())
        return await asyncio.shield(load)

    async def _load_nli(self) -> tuple[NliModel, MicroBatcher]:
        config = self._models.nli
        path = config.model
        if not path:
            own = self._models.cache_dir / TRAINED_DIR
            log.info("NLI: using %s (training it first if needed)", own)
            path = await asyncio.to_thread(ensure_trained, own, config.train_steps)
        device = select_device(self._models.device)
        model = await asyncio.get_running_loop().run_in_executor(
            self._encode_thread, NliModel, path, device, config.forward_batch_size
        )
        batcher = MicroBatcher(model.predict, config.max_batch_size, config.max_wait_ms, self._encode_thread)
        batcher.start()
        return model, batcher

    async def close(self) -> None:
        load = self._nli_load
        if load is None:
            return
        if not load.done():
            load.cancel()  # a training thread runs to its end; the load does not go on after it
        elif not load.cancelled() and load.exception() is None:
            await load.result()[1].close()

    async def generator(self) -> Generator:
        async with self._generator_lock:
            if self._generator is None:
                config = self._models.generator
                if config.backend == "openai":
                    self._generator = OpenAIGenerator(config)
                else:
                    device = select_device(self._models.device)
                    self._generator = await asyncio.to_thread(
                        LocalGenerator,
                        self._models.cache_dir,
                        device,
                        config.max_batch_size,
                        config.max_wait_ms,
                        self._limits.max_prompt_tokens,
                        config.max_batch_prompt_tokens,
                        config.max_batch_cache_tokens,
                    )
                if config.cache_max_entries:
                    identity = (
                        f"openai:{config.openai_base_url}:{config.openai_model}"
                        if config.backend == "openai"
                        else f"local:{self._generator.model_name}"
                    )
                    self._generator = CachedGenerator(
                        self._generator,
                        identity,
                        self._generation_cache_file,
                        config.cache_max_entries,
                    )
            return self._generator

    async def Embed(self, request, context):
        limits = self._limits
        _check_texts(request.texts, 1, limits.max_embed_texts, limits.max_text_chars, "texts")
        vectors: np.ndarray = await self._batcher.submit(list(request.texts))
        return models_pb2.EmbedResponse(
            vectors=vectors.astype("<f4").tobytes(),
            count=vectors.shape[0],
            dimension=vectors.shape[1],
            model=self._embedder.model_name,
        )

    async def Entail(self, request, context):
        limits = self._limits
        if not 1 <= len(request.pairs) <= limits.max_entail_pairs:
            raise errors.InvalidArgument(f"send 1 to {limits.max_entail_pairs} pairs", field="pairs")
        for index, pair in enumerate(request.pairs):
            if max(len(pair.premise), len(pair.hypothesis)) > limits.max_text_chars:
                raise errors.InvalidArgument(
                    f"pairs[{index}]: premise and hypothesis are at most {limits.max_text_chars} characters",
                    field=f"pairs[{index}]",
                )
        model, batcher = await self.nli()
        probabilities = await batcher.submit([(p.premise, p.hypothesis) for p in request.pairs])
        return models_pb2.EntailResponse(
            results=[
                models_pb2.Entailment(entailment=e, neutral=n, contradiction=c)
                for e, n, c in probabilities.tolist()
            ],
            model=model.model_name,
        )

    async def Cluster(self, request, context):
        limits = self._limits
        _check_texts(request.texts, 1, limits.max_cluster_texts, limits.max_text_chars, "texts")
        threshold = request.distance_threshold or clustering.DEFAULT_DISTANCE_THRESHOLD
        if not 0 < threshold <= 2:
            raise errors.InvalidArgument("distance_threshold must be in (0, 2]", field="distance_threshold")
        if request.method not in models_pb2.ClusterMethod.values():
            raise errors.InvalidArgument(f"unknown method {request.method}", field="method")
        labels = await self._cluster(list(request.texts), request.method, threshold)
        return models_pb2.ClusterResponse(labels=labels, clusters=len(set(labels)))

    async def _cluster(self, texts: list[str], method: int, threshold: float) -> list[int]:
        if method == models_pb2.CLUSTER_METHOD_EXACT:
            return clustering.exact_clusters(texts)
        vectors = await self._batcher.submit(texts)
        labels = await asyncio.to_thread(clustering.embedding_clusters, vectors, threshold)
        if method != models_pb2.CLUSTER_METHOD_ENTAILMENT:
            return labels
        _, batcher = await self.nli()

        async def entail(pairs: list[tuple[int, int]]):
            return (await batcher.submit([(texts[i], texts[j]) for i, j in pairs])).tolist()

        return await clustering.refine_with_entailment(labels, entail, self._limits.max_cluster_entail_pairs)

    async def Generate(self, request, context):
        limits = self._limits
        if not 1 <= len(request.messages) <= limits.max_messages:
            raise errors.InvalidArgument(f"send 1 to {limits.max_messages} messages", field="messages")
        if sum(len(m.content) + len(m.role) for m in request.messages) > limits.max_prompt_chars:
            raise errors.InvalidArgument(
                f"the messages are longer than {limits.max_prompt_chars} characters together",
                field="messages",
            )
        if not 0 <= request.max_new_tokens <= limits.max_new_tokens:
            raise errors.InvalidArgument(
                f"max_new_tokens must be in [0, {limits.max_new_tokens}]", field="max_new_tokens"
            )
        if not (request.temperature == 0 or MIN_TEMPERATURE <= request.temperature <= MAX_TEMPERATURE):
            raise errors.InvalidArgument(
                f"temperature must be 0 (greedy) or in [{MIN_TEMPERATURE}, {MAX_TEMPERATURE}]",
                field="temperature",
            )
        if not 0 <= request.top_p <= 1:
            raise errors.InvalidArgument("top_p must be in [0, 1]", field="top_p")
        if len(request.stop) > limits.max_stop_strings or any(len(s) > MAX_STOP_CHARS for s in request.stop):
            raise errors.InvalidArgument(
                f"at most {limits.max_stop_strings} stop strings of at most {MAX_STOP_CHARS} characters",
                field="stop",
            )
        if len(request.cache_scope) > MAX_CACHE_SCOPE_CHARS:
            raise errors.InvalidArgument(
                f"cache_scope is at most {MAX_CACHE_SCOPE_CHARS} characters", field="cache_scope"
            )
        params = GenerationParams(
            max_new_tokens=request.max_new_tokens or 256,
            temperature=request.temperature,
            top_p=request.top_p or 1.0,
            seed=request.seed if request.HasField("seed") else None,
            stop=tuple(request.stop),
            cache_scope=request.cache_scope,
        )
        messages = [{"role": m.role or "user", "content": m.content} for m in request.messages]
        flow = dict(context.invocation_metadata()).get(FLOW_METADATA_KEY, "")[:MAX_FLOW_CHARS]
        with self._generations.admit(flow):
            generator = await self.generator()
            tokens = 0
            async for piece in generator.stream(messages, params, flow):
                tokens += 1 if piece.text else 0
                yield models_pb2.GenerateResponse(
                    text=piece.text,
                    finish_reason=piece.finish_reason,
                    completion_tokens=tokens,
                    model=generator.model_name,
                    cached_decode_ms=piece.cached_decode_ms,
                )


class Admission:
    """Counts generations in progress, in all and per flow; one past either limit is refused
    with RESOURCE_EXHAUSTED (a bounded queue: waiting work cannot pile up without end)."""

    def __init__(self, total: int, per_flow: int):
        self._total, self._per_flow = total, per_flow
        self._running: Counter[str] = Counter()

    @contextmanager
    def admit(self, flow: str):
        if self._running.total() >= self._total or self._running[flow] >= self._per_flow:
            raise errors.ResourceExhausted(
                f"the generator has {self._running.total()} generations in progress "
                f"({self._running[flow]} of this flow); at most {self._total} ({self._per_flow} per flow)",
                reason="GENERATION_QUEUE_FULL",
            )
        self._running[flow] += 1
        try:
            yield
        finally:
            self._running[flow] -= 1
            if not self._running[flow]:
                del self._running[flow]


def _check_texts(texts, low: int, high: int, max_chars: int, field: str) -> None:
    if not low <= len(texts) <= high:
        raise errors.InvalidArgument(f"send {low} to {high} {field}", field=field)
    for index, text in enumerate(texts):
        if len(text) > max_chars:
            raise errors.InvalidArgument(
                f"{field}[{index}] is longer than {max_chars} characters", field=f"{field}[{index}]"
            )


def call_policies(deadlines: DeadlineLimits) -> dict[str, rpc.CallPolicy]:
    unary = rpc.CallPolicy(deadline_s=deadlines.models_unary_s)
    generate = rpc.CallPolicy(deadline_s=deadlines.generate_s)
    return {"Embed": unary, "Entail": unary, "Cluster": unary, "Generate": generate}
