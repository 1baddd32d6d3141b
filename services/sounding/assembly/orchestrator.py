"""`sounding serve`: the orchestrator's wiring. Starts (or joins) Ray, opens the store, starts the
strategy workers, builds each service and each tenant's learned state, and serves SoundingService,
CorpusService, ToolService, health and reflection (`gateway.routing`) until told to stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress

from grpc_health.v1 import health

from sounding.assembly.configs import (
    graph_config,
    learning_config,
    ray_executor_config,
    retrieval_config,
    sounding_servicer_config,
    tool_config,
)
from sounding.assembly.ray_runtime import start_ray
from sounding.assembly.signals import stop_on_signals
from sounding.corpus.graph import GraphBuilder
from sounding.corpus.service import CorpusManager
from sounding.gateway import routing
from sounding.gateway.readiness import Readiness
from sounding.gateway.servicers import CorpusServicer, SoundingServicer, ToolServicer
from sounding.inquiry.llm.assessment import Models
from sounding.inquiry.registry import Backend
from sounding.inquiry.service import InquiryService
from sounding.learning.corpus_backend import CorpusTools
from sounding.learning.corpus_inquiry import CorpusInquiryLearning
from sounding.learning.inquiry import InquiryLearning
from sounding.learning.service import LearningConfig, LearningService
from sounding.learning.tenants import TenantLearning, Tenants
from sounding.models.client import ModelsClient
from sounding.retrieval.executors import RayExecutor
from sounding.retrieval.service import RetrievalService
from sounding.runtime import allocator, collector, telemetry
from sounding.serving import admission, auth, rpc
from sounding.settings.config import Settings
from sounding.settings.limits import LimitsSettings
from sounding.store.collections import Store
from sounding.store.connection import configure_caches
from sounding.store.corpus_inquiry import CorpusInquiryLog
from sounding.store.database import Database
from sounding.store.durability import Durability
from sounding.store.graph import GraphStore
from sounding.store.learning import LearningLog
from sounding.store.tenancy import DEFAULT_TENANT
from sounding.store.tools import ToolStore
from sounding.tools.protocol import ToolConfig
from sounding.tools.service import ToolService
from sounding.tools.teacher import GeneratorTeacher

log = logging.getLogger(__name__)


def tenant_opener(
    learning: LearningConfig, tools: ToolConfig, db: Database, store: Store, models: ModelsClient
) -> Callable[[str], Awaitable[TenantLearning]]:
    """How a tenant's learned state is opened on first use: its learning log and selector, its
    tool router, its corpus inquiry outcome models and its inquiry learning."""

    async def open_tenant(tenant: str) -> TenantLearning:
        learning_log = await LearningLog.open(db, tenant)
        learning_service = await LearningService.restore(learning_log, learning)
        learning_service.follow_log()
        teacher = (
            GeneratorTeacher(models, tenant, timeout_s=tools.settings.teacher_timeout_s)
            if tools.settings.teacher == "generator"
            else None
        )
        tool_service = await ToolService.open(await ToolStore.open(db, tenant), models, teacher, tools)
        tool_service.follow_store(learning.follow_interval_s)
        corpus_inquiry = await CorpusInquiryLearning.open(await CorpusInquiryLog.open(db, tenant))
        corpus_inquiry.follow_log(learning.follow_interval_s)
        return TenantLearning(
            learning_service,
            InquiryLearning(learning_log, store, corpus_inquiry, tenant),
            tool_service,
            corpus_inquiry,
        )

    return open_tenant


def inquiry_backends(
    retrieval: RetrievalService,
    tenants: Tenants,
    models: ModelsClient,
    store: Store,
    graphs: GraphStore,
    limits: LimitsSettings,
) -> Callable[[str, str, Backend], Models | CorpusTools]:
    """The backend of a session (id, tenant, the kind its domain's spec names): the corpus tools
    (search, models and outcome models), or the generators."""

    def corpus_tools(session_id: str, tenant: str) -> CorpusTools:
        return CorpusTools(
            tenant=tenant,
            session_id=session_id,
            retrieval=retrieval,
            learning=lambda: tenants.of(tenant),
            models=models,
            store=store,
            graphs=graphs,
            search_timeout_s=limits.deadlines.retrieve_s,
            models_timeout_s=limits.deadlines.models_unary_s,
            generate_timeout_s=limits.deadlines.generate_s,
        )

    def generators(session_id: str, tenant: str) -> Models:
        return Models(
            models,
            flow=f"inquiry:{session_id}",
            in_flight=limits.inquiry.llm_generations_in_flight,
            tenant=tenant,
        )

    builders: Mapping[Backend, Callable[[str, str], Models | CorpusTools]] = {
        "corpus_tools": corpus_tools,
        "generators": generators,
    }
    return lambda session_id, tenant, kind: builders[kind](session_id, tenant)


async def serve(settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT (or cancelled), then drain: NOT_SERVING at once, new calls
    refused with UNAVAILABLE after `drain_delay_s` (balancers checking health have stopped
    sending them by then), inquiry streams waiting for their client handed back (UNAVAILABLE,
    DRAINING: resumed on another orchestrator), other calls in flight given `drain_grace_s` to
    finish."""
    telemetry.setup("sounding-orchestrator")
    allocator.configure()
    collector.configure()
    authenticator = auth.Authenticator(
        settings.auth.tokens, settings.auth.tokens_file, settings.auth.keep_last_good_tokens
    )
    rpc.refuse_open_plaintext(
        settings.address, authenticator.enabled, settings.auth.allow_unauthenticated, "the orchestrator"
    )
    learning = learning_config(settings)  # refused before anything starts
    limits = settings.limits
    configure_caches(
        limits.memory.orchestrator_lancedb_index_cache_mib, limits.memory.lancedb_metadata_cache_mib
    )
    start_ray(settings)
    serving = asyncio.Event()
    stop = stop_on_signals(serving)
    db = await Database.open(
        settings.store_location,
        Durability(settings.durability, settings.store_location),
        settings.store.lease_ttl_s,
        settings.address,
    )
    store = await Store.open(db)
    models = ModelsClient.of(settings.models)
    executor = await RayExecutor.open(ray_executor_config(settings))
    tenants = Tenants(tenant_opener(learning, tool_config(settings), db, store, models))
    await tenants.of(DEFAULT_TENANT)
    graphs = await GraphStore.open(db)
    graph_builder = GraphBuilder(store, graphs, models, graph_config(settings))
    retrieval = RetrievalService(store, executor, models, graphs, retrieval_config(settings))
    corpus = CorpusManager(store, models, graph_builder, executor.forget, limits.corpus)
    inquiry = InquiryService(
        store, inquiry_backends(retrieval, tenants, models, store, graphs, limits), limits.inquiry
    )
    sounding = SoundingServicer(retrieval, inquiry, tenants, sounding_servicer_config(settings))
    gate = admission.Gate(limits.transport.max_concurrent_rpcs)
    health_servicer = health.aio.HealthServicer()
    server = rpc.server(limits.transport)
    server.add_generic_rpc_handlers(
        routing.handlers(
            sounding,
            CorpusServicer(corpus),
            ToolServicer(tenants),
            health_servicer,
            limits,
            gate,
            authenticator,
        )
    )
    instance = rpc.instance_health_names(settings.instance_id)
    readiness = Readiness(
        health_servicer,
        (*routing.SERVICES, *instance),
        {
            "the models sidecar": models.check_serving,
            "the strategy workers": executor.calls_in_flight,
            "the token file": authenticator.check,
        },
        probe_timeout_s=limits.deadlines.readiness_probe_s,
    )
    rpc.listen(server, settings.address, settings.tls)
    await server.start()
    # It listens on its address now, so an earlier orchestrator there is gone: its sessions are free.
    await store.session_holds.release_predecessors()
    background = [
        asyncio.ensure_future(inquiry.expire_idle_sessions()),
        asyncio.ensure_future(inquiry.keep_holds()),
    ]
    try:
        await readiness.start()
        collector.freeze()
        serving.set()
        log.info("orchestrator serving on %s (store %s)", settings.address, settings.store_location.uri)
        await graph_builder.catch_up()
        await stop.wait()
    finally:
        log.info("draining: %d calls in flight have %.0f s", gate.in_flight, limits.transport.drain_grace_s)
        await readiness.drain()
        await asyncio.sleep(limits.transport.drain_delay_s)
        inquiry.drain()  # streams waiting for their client end now, to resume elsewhere
        if not await gate.drain(limits.transport.drain_grace_s):
            log.warning("drained: %d calls still in flight are cancelled", gate.in_flight)
        await server.stop(grace=1.0)
        for task in background:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        inquiry.close()
        await executor.close()
        await tenants.close()
        await models.close()
        telemetry.shutdown()
