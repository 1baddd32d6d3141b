"""`sounding serve models`: the models sidecar's wiring. Loads the embedder on its own thread,
starts the micro-batcher, and serves ModelService and health until the server terminates."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from grpc_health.v1 import health, health_pb2

from sounding.models.batching import MicroBatcher
from sounding.models.client import SERVICE_NAME, sidecar_token
from sounding.models.embedder import MODEL_NAME, TextEncoder, TorchEmbedder, model_dir
from sounding.models.onnx_embedder import OnnxEmbedder, UnsupportedModel, exported
from sounding.models.server import (
    MODEL_SERVICE,
    ModelServicer,
    ModelServicerConfig,
    call_policies,
    select_device,
)
from sounding.runtime import allocator, telemetry
from sounding.serving import admission, auth, rpc
from sounding.settings.config import ModelsSettings, Settings

log = logging.getLogger(__name__)


def model_servicer_config(settings: Settings) -> ModelServicerConfig:
    return ModelServicerConfig(
        models=settings.models,
        limits=settings.limits.models,
        generation_cache_file=settings.cache_dir / "generations.sqlite",
    )


def load_embedder(models: ModelsSettings, device: str) -> TextEncoder:
    """The embedder `models.embedder.backend` names; `auto` is ONNX Runtime on CPU for a model it
    can export, else torch (the GPU's runtime)."""
    embedder = models.embedder
    backend = embedder.backend
    if backend == "auto":
        backend = "onnx" if device == "cpu" else "torch"
    if backend == "onnx":
        try:
            return OnnxEmbedder(
                exported(model_dir(embedder.model), models.cache_dir),
                embedder.model or MODEL_NAME,
                embedder.forward_batch_size,
                embedder.single_thread_max_texts,
                models.torch_threads,
            )
        except UnsupportedModel as refusal:
            if embedder.backend == "onnx":
                raise
            log.info("embedder on torch: %s", refusal)
    return TorchEmbedder(
        device, embedder.forward_batch_size, embedder.single_thread_max_texts, embedder.model
    )


def sidecar_authenticator(settings: Settings) -> auth.Authenticator:
    """Callers must send the sidecar's token when one is configured; refuses to serve a
    non-loopback address without one (unless allowed)."""
    token = sidecar_token(settings.models)
    rpc.refuse_open_plaintext(
        settings.models.address, bool(token), settings.auth.allow_unauthenticated, "the models sidecar"
    )
    if not token:
        return auth.Authenticator()
    return auth.Authenticator(
        [auth.TokenEntry(sha256=auth.hash_token(token), tenant="sidecar", role="admin")]
    )


async def serve(settings: Settings, ready: asyncio.Event | None = None) -> None:
    telemetry.setup("sounding-models")
    allocator.configure()
    authenticator = sidecar_authenticator(settings)
    import torch

    if settings.models.torch_threads:
        torch.set_num_threads(settings.models.torch_threads)
    device = select_device(settings.models.device)
    encode_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
    embedder = await asyncio.get_running_loop().run_in_executor(
        encode_thread, load_embedder, settings.models, device
    )
    batcher = MicroBatcher(
        embedder.encode,
        settings.models.embedder.max_batch_size,
        settings.models.embedder.max_wait_ms,
        encode_thread,
    )
    batcher.start()
    servicer = ModelServicer(embedder, batcher, encode_thread, model_servicer_config(settings))
    health_servicer = health.aio.HealthServicer()
    transport = settings.limits.transport
    server = rpc.server(transport)
    gate = admission.Gate(transport.max_concurrent_rpcs)
    server.add_generic_rpc_handlers(
        (
            rpc.service_handler(
                MODEL_SERVICE, servicer, call_policies(settings.limits.deadlines), gate, authenticator
            ),
            admission.open_service_handler(
                health_pb2.DESCRIPTOR.services_by_name["Health"],
                health_servicer,
                admission.open_budgets(transport),
                authenticator,
            ),
        )
    )
    instance = rpc.instance_health_names(settings.instance_id)
    names = (SERVICE_NAME, "", *instance)
    for name in names:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    rpc.listen(server, settings.models.address, settings.models.tls)
    await server.start()
    if settings.models.generator.preload:
        await servicer.generator()
    for name in names:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("models sidecar serving on %s (%s)", settings.models.address, device)
    if ready is not None:
        ready.set()
    try:
        await server.wait_for_termination()
    finally:
        for name in names:
            await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        await gate.drain(settings.limits.transport.drain_grace_s)
        await server.stop(grace=1.0)
        await servicer.close()
        await batcher.close()
        encode_thread.shutdown(wait=True, cancel_futures=True)
        telemetry.shutdown()
