"""`sounding serve models`: the models sidecar's gRPC server (Embed, Generate, Entail, Cluster,
health). Embedding and NLI share one thread (one OpenMP team), each micro-batched."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing

import grpc
import numpy as np
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry.trace import SpanKind

from sounding import errors, telemetry
from sounding.api.sounding.models.v1 import models_pb2, models_pb2_grpc
from sounding.config import Settings
from sounding.core import clustering
from sounding.grpc_errors import abort
from sounding.models.batching import MicroBatcher
from sounding.models.embedder import Embedder
from sounding.models.generation_cache import CachedGenerator
from sounding.models.generators import GenerationParams, Generator, LocalGenerator, OpenAIGenerator
from sounding.models.nli import TRAINED_DIR, NliModel, ensure_trained

log = logging.getLogger(__name__)

MAX_EMBED_TEXTS = 4096
MAX_ENTAIL_PAIRS = 4096
MAX_CLUSTER_TEXTS = 1024
MAX_NEW_TOKENS = 4096
SERVICE_NAME = "sounding.models.v1.ModelService"


def select_device(preference: str) -> str:
    import torch

    if preference == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return preference


class ModelServicer(models_pb2_grpc.ModelServiceServicer):
    def __init__(
        self, settings: Settings, embedder: Embedder, batcher: MicroBatcher, encode_thread: ThreadPoolExecutor
    ):
        self._settings = settings
        self._embedder = embedder
        self._batcher = batcher
        self._encode_thread = encode_thread
        self._generator: Generator | None = None
        self._generator_lock = asyncio.Lock()
        self._nli: tuple[NliModel, MicroBatcher] | None = None
        self._nli_lock = asyncio.Lock()

    async def nli(self) -> tuple[NliModel, MicroBatcher]:
        """The NLI model and its batcher, loaded on first use; Sounding's own model is trained
        first (on a thread of its own, so Embed keeps serving) when no adequate copy is cached."""
        async with self._nli_lock:
            if self._nli is None:
                config = self._settings.models.nli
                path = config.model
                if not path:
                    own = self._settings.models.cache_dir / TRAINED_DIR
                    log.info("NLI: using %s (training it first if needed)", own)
                    path = await asyncio.to_thread(ensure_trained, own, config.train_max_minutes)
                device = select_device(self._settings.models.device)
                model = await asyncio.get_running_loop().run_in_executor(
                    self._encode_thread, NliModel, path, device, config.max_batch_size
                )
                batcher = MicroBatcher(
                    model.predict, config.max_batch_size, config.max_wait_ms, self._encode_thread
                )
                batcher.start()
                self._nli = (model, batcher)
            return self._nli

    async def close(self) -> None:
        if self._nli is not None:
            await self._nli[1].close()

    async def generator(self) -> Generator:
        async with self._generator_lock:
            if self._generator is None:
                config = self._settings.models.generator
                if config.backend == "openai":
                    self._generator = OpenAIGenerator(config)
                else:
                    device = select_device(self._settings.models.device)
                    self._generator = await asyncio.to_thread(
                        LocalGenerator,
                        self._settings.models.cache_dir,
                        device,
                        config.max_batch_size,
                        config.max_wait_ms,
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
                        self._settings.cache_dir / "generations.sqlite",
                        config.cache_max_entries,
                    )
            return self._generator

    async def Embed(self, request, context):
        with telemetry.tracer().start_as_current_span(
            "models.Embed",
            context=telemetry.extract(context.invocation_metadata()),
            kind=SpanKind.SERVER,
            attributes={"texts": len(request.texts)},
        ):
            if not request.texts:
                await abort(context, errors.InvalidArgument("texts must not be empty", field="texts"))
            if len(request.texts) > MAX_EMBED_TEXTS:
                await abort(
                    context,
                    errors.InvalidArgument(f"at most {MAX_EMBED_TEXTS} texts", field="texts"),
                )
            vectors: np.ndarray = await self._batcher.submit(list(request.texts))
            return models_pb2.EmbedResponse(
                vectors=vectors.astype("<f4").tobytes(),
                count=vectors.shape[0],
                dimension=vectors.shape[1],
                model=self._embedder.model_name,
            )

    async def Entail(self, request, context):
        with telemetry.tracer().start_as_current_span(
            "models.Entail",
            context=telemetry.extract(context.invocation_metadata()),
            kind=SpanKind.SERVER,
            attributes={"pairs": len(request.pairs)},
        ):
            if not 1 <= len(request.pairs) <= MAX_ENTAIL_PAIRS:
                await abort(
                    context,
                    errors.InvalidArgument(f"send 1 to {MAX_ENTAIL_PAIRS} pairs", field="pairs"),
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
        with telemetry.tracer().start_as_current_span(
            "models.Cluster",
            context=telemetry.extract(context.invocation_metadata()),
            kind=SpanKind.SERVER,
            attributes={"texts": len(request.texts)},
        ):
            if not 1 <= len(request.texts) <= MAX_CLUSTER_TEXTS:
                await abort(
                    context,
                    errors.InvalidArgument(f"send 1 to {MAX_CLUSTER_TEXTS} texts", field="texts"),
                )
            threshold = request.distance_threshold or clustering.DEFAULT_DISTANCE_THRESHOLD
            if not 0 < threshold <= 2:
                await abort(
                    context,
                    errors.InvalidArgument(
                        "distance_threshold must be in (0, 2]", field="distance_threshold"
                    ),
                )
            labels = await self._cluster(list(request.texts), request.method, threshold)
            return models_pb2.ClusterResponse(labels=labels, clusters=len(set(labels)))

    async def _cluster(self, texts: list[str], method: int, threshold: float) -> list[int]:
        if method == models_pb2.CLUSTER_METHOD_EXACT:
            return clustering.exact_clusters(texts)
        vectors = await self._batcher.submit(texts)
        labels = await asyncio.to_thread(clustering.embedding_clusters, vectors, threshold)
        if method != models_pb2.CLUSTER_METHOD_ENTAILMENT:
            return labels
        pairs = clustering.within_cluster_pairs(labels)
        if not pairs:
            return labels
        _, batcher = await self.nli()
        probabilities = await batcher.submit([(texts[i], texts[j]) for i, j in pairs])
        by_pair = dict(zip(pairs, probabilities.tolist(), strict=True))
        return clustering.refine_with_entailment(labels, by_pair)

    async def Generate(self, request, context):
        pieces = telemetry.traced_stream(
            self._generate(request, context),
            "models.Generate",
            telemetry.extract(context.invocation_metadata()),
            SpanKind.SERVER,
        )
        async with aclosing(pieces):
            async for piece in pieces:
                yield piece

    async def _generate(self, request, context):
        if not request.messages:
            await abort(context, errors.InvalidArgument("messages must not be empty", field="messages"))
        if not 0 <= request.max_new_tokens <= MAX_NEW_TOKENS:
            await abort(
                context,
                errors.InvalidArgument(
                    f"max_new_tokens must be in [0, {MAX_NEW_TOKENS}]", field="max_new_tokens"
                ),
            )
        if request.temperature < 0 or not 0 <= request.top_p <= 1:
            field = "temperature" if request.temperature < 0 else "top_p"
            await abort(context, errors.InvalidArgument(f"{field} out of range", field=field))
        params = GenerationParams(
            max_new_tokens=request.max_new_tokens or 256,
            temperature=request.temperature,
            top_p=request.top_p or 1.0,
            seed=request.seed if request.HasField("seed") else None,
            stop=tuple(request.stop),
        )
        messages = [{"role": m.role or "user", "content": m.content} for m in request.messages]
        generator = await self.generator()
        tokens = 0
        try:
            async for piece in generator.stream(messages, params):
                tokens += 1 if piece.text else 0
                yield models_pb2.GenerateResponse(
                    text=piece.text,
                    finish_reason=piece.finish_reason,
                    completion_tokens=tokens,
                    model=generator.model_name,
                    cached_decode_ms=piece.cached_decode_ms,
                )
        except errors.SoundingError as error:
            await abort(context, error)


async def serve(settings: Settings, ready: asyncio.Event | None = None) -> None:
    telemetry.setup("sounding-models")
    import torch

    if settings.models.torch_threads:
        torch.set_num_threads(settings.models.torch_threads)
    device = select_device(settings.models.device)
    encode_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
    embedder = await asyncio.get_running_loop().run_in_executor(
        encode_thread,
        Embedder,
        device,
        settings.models.embedder.max_batch_size,
        settings.models.embedder.single_thread_max_texts,
    )
    batcher = MicroBatcher(
        embedder.encode,
        settings.models.embedder.max_batch_size,
        settings.models.embedder.max_wait_ms,
        encode_thread,
    )
    batcher.start()
    servicer = ModelServicer(settings, embedder, batcher, encode_thread)
    health_servicer = health.aio.HealthServicer()
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            # A second sidecar on a taken port must fail, not silently share its traffic.
            ("grpc.so_reuseport", 0),
        ]
    )
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    models_pb2_grpc.add_ModelServiceServicer_to_server(servicer, server)
    for name in (SERVICE_NAME, ""):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    server.add_insecure_port(settings.models.address)
    await server.start()
    if settings.models.generator.preload:
        await servicer.generator()
    for name in (SERVICE_NAME, ""):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("models sidecar serving on %s (%s)", settings.models.address, device)
    if ready is not None:
        ready.set()
    try:
        await server.wait_for_termination()
    finally:
        await server.stop(grace=2)
        await servicer.close()
        await batcher.close()
        encode_thread.shutdown(wait=True, cancel_futures=True)
        telemetry.shutdown()
