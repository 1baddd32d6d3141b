"""`sounding serve`: the orchestrator. Starts (or joins) Ray, opens the store, starts the
strategy workers and serves SoundingService, CorpusService, ToolService, health and reflection."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import warnings
from contextlib import suppress
from typing import cast

from google.protobuf import descriptor, descriptor_pb2, descriptor_pool
from grpc_health.v1 import health, health_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2
from sounding_client.api.sounding.v1 import corpus_pb2, sounding_pb2, tools_pb2

from sounding import admission, allocator, auth, rpc, telemetry
from sounding.config import SelectionSettings, Settings
from sounding.core.bandit import ExplorationSchedule
from sounding.corpus.graph import GraphBuilder
from sounding.corpus.service import CorpusManager
from sounding.gateway.readiness import Readiness
from sounding.gateway.servicers import CorpusServicer, SoundingServicer, ToolServicer
from sounding.inquiry.domains.corpus import CorpusInquiry
from sounding.inquiry.llm.assessment import Models
from sounding.inquiry.service import InquiryService
from sounding.learning.corpus_backend import CorpusTools
from sounding.learning.corpus_inquiry import CorpusInquiryLearning
from sounding.learning.inquiry import InquiryLearning
from sounding.learning.selection import SelectionConfig
from sounding.learning.service import LearningService
from sounding.learning.tenants import TenantLearning, Tenants
from sounding.limits import LimitsSettings
from sounding.models.client import ModelsClient
from sounding.retrieval.executors import RayExecutor
from sounding.retrieval.service import RetrievalService
from sounding.retrieval.strategies import STRATEGIES
from sounding.store.collections import Store
from sounding.store.connection import configure_caches
from sounding.store.corpus_inquiry import CorpusInquiryLog
from sounding.store.durability import Durability
from sounding.store.graph import GraphStore
from sounding.store.learning import LearningLog
from sounding.store.lock import DataDirectoryLock
from sounding.store.tenancy import DEFAULT_TENANT
from sounding.store.tools import ToolStore
from sounding.tools.service import ToolService
from sounding.tools.teacher import GeneratorTeacher

log = logging.getLogger(__name__)

SOUNDING_SERVICE = sounding_pb2.DESCRIPTOR.services_by_name["SoundingService"]
CORPUS_SERVICE = corpus_pb2.DESCRIPTOR.services_by_name["CorpusService"]
TOOL_SERVICE = tools_pb2.DESCRIPTOR.services_by_name["ToolService"]
SERVICES = (SOUNDING_SERVICE.full_name, CORPUS_SERVICE.full_name, TOOL_SERVICE.full_name)
HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"]
REFLECTION_SERVICE = cast(
    descriptor.ServiceDescriptor, reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"]
)


def public_descriptors() -> descriptor_pool.DescriptorPool:
    """A pool of the public API's files and what they import, and of health's and reflection's:
    all that reflection tells a caller (the sidecar's and the workers' protos stay unlisted)."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: descriptor.FileDescriptor) -> None:
        if file.name in added:
            return
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        pool.Add(proto)
        added.add(file.name)

    for file in (sounding_pb2.DESCRIPTOR, corpus_pb2.DESCRIPTOR, tools_pb2.DESCRIPTOR):
        add(file)
    for service in (HEALTH_SERVICE, REFLECTION_SERVICE):
        add(service.file)
    return pool


def call_policies(limits: LimitsSettings) -> dict[str, dict[str, rpc.CallPolicy]]:
    """Per service and method: the default deadline, request timeouts, concurrency and the least
    role a caller needs (README, "Security": readers query, writers change collections and report
    outcomes, admins change what the tenant's later calls are served with); the reads that teach
    the tenant's learners are audited too."""
    d = limits.deadlines
    unary = rpc.CallPolicy(deadline_s=d.unary_s)
    return {
        SOUNDING_SERVICE.name: {
            "Retrieve": rpc.CallPolicy(
                d.retrieve_s, max_concurrent=limits.retrieve.max_concurrent, audited=True
            ),
            "Inquire": rpc.CallPolicy(
                None, d.first_message_s, d.inquire_idle_s, limits.inquiry.max_open_sessions, audited=True
            ),
            "Observe": rpc.CallPolicy(
                d.observe_s, d.first_message_s, d.first_message_s, limits.observe.max_concurrent, "writer"
            ),
            "Calibrate": rpc.CallPolicy(
                d.calibrate_s, max_concurrent=limits.calibrate.max_concurrent, role="admin"
            ),
            # Reads the whole learning log: a few at a time.
            "GetStrategyMetrics": rpc.CallPolicy(d.unary_s, max_concurrent=2),
        },
        CORPUS_SERVICE.name: {
            "CreateCollection": rpc.CallPolicy(deadline_s=d.unary_s, role="writer"),
            "GetCollection": unary,
            "ListCollections": unary,
            "DeleteCollection": rpc.CallPolicy(deadline_s=d.unary_s, role="writer"),
            "IngestDocuments": rpc.CallPolicy(
                None, d.first_message_s, d.ingest_idle_s, limits.corpus.max_concurrent_ingests, "writer"
            ),
        },
        TOOL_SERVICE.name: {
            "PutTools": rpc.CallPolicy(deadline_s=d.unary_s, role="writer"),
            "DeleteTools": rpc.CallPolicy(deadline_s=d.unary_s, role="writer"),
            "ListTools": unary,
            "RouteTool": unary,
            # Reads the toolset's labels: a few at a time.
            "GetToolMetrics": rpc.CallPolicy(d.unary_s, max_concurrent=2),
        },
    }


def start_ray(settings: Settings) -> None:
    if not settings.ray_address:
        # A local Ray runtime is one machine's: its node address is loopback, so its daemons and
        # workers listen on loopback only (on Linux Ray otherwise binds every interface). Read
        # when ray is first imported, and by the processes it starts.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if ray.is_initialized():
        return
    if settings.ray_address:
        ray.init(address=settings.ray_address, log_to_driver=False)
    else:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # Ray starts its workers at niceness 15, made for batch tasks; the strategy workers serve
        # a Retrieve's arms and sit on its critical path. With another process busy on this
        # 2-core machine, niceness 15 made Retrieve p50 about 5% slower than 0
        # (bench/README.md). On a cluster, set RAY_worker_niceness=0 on the nodes.
        os.environ.setdefault("RAY_worker_niceness", "0")
        with warnings.catch_warnings():
            # Ray forks and immediately execs its daemons; lancedb's fork warning does not apply.
            warnings.filterwarnings("ignore", message="lancedb fork support")
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)


def selection_config(settings: SelectionSettings, history_capacity: int) -> SelectionConfig:
    return SelectionConfig(
        alpha=settings.alpha,
        schedule=ExplorationSchedule(
            cold_start_queries=settings.cold_start_queries,
            force_all_every=settings.force_all_every,
            initial_rate=settings.exploration_rate,
            min_rate=settings.min_exploration_rate,
            decay=settings.exploration_decay,
        ),
        seed=settings.seed,
        history_capacity=history_capacity,
    )


def stop_on_signals(serving: asyncio.Event) -> asyncio.Event:
    """An event set by SIGTERM or SIGINT. Before `serving` is set (while starting up), or on a
    second signal (cutting a drain short), the running task is cancelled instead. Installed after
    Ray starts: Ray's driver replaces the Python handlers, and its C++ failure-signal handler
    arms a 3-second abort on SIGTERM (ray-project/ray#64830), which the handler here disarms so
    that a drain can take its grace period."""
    stop = asyncio.Event()
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    if task is None:
        raise RuntimeError("stop_on_signals runs inside the serving task")

    def on_signal() -> None:
        signal.alarm(0)
        if stop.is_set() or not serving.is_set():
            task.cancel()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    return stop


async def serve(settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT (or cancelled), then drain: NOT_SERVING at once, new calls
    refused with UNAVAILABLE, calls in flight given `drain_grace_s` to finish."""
    telemetry.setup("sounding-orchestrator")
    allocator.configure()
    authenticator = auth.Authenticator(
        settings.auth.tokens, settings.auth.tokens_file, settings.auth.keep_last_good_tokens
    )
    rpc.refuse_open_plaintext(
        settings.address, authenticator.enabled, settings.auth.allow_unauthenticated, "the orchestrator"
    )
    data_lock = DataDirectoryLock(settings.data_dir).acquire()
    memory = settings.limits.memory
    configure_caches(memory.orchestrator_lancedb_index_cache_mib, memory.lancedb_metadata_cache_mib)
    start_ray(settings)
    serving = asyncio.Event()
    stop = stop_on_signals(serving)
    durability = Durability(settings.durability, settings.store_location)
    store = await Store.open(settings.store_location, durability)
    models = ModelsClient.of(settings.models)
    executor = await RayExecutor.open(settings)
    selectable = settings.retrieval.selection.arms
    unknown = sorted(set(selectable) - set(STRATEGIES))
    if unknown or not selectable:
        raise ValueError(
            f"retrieval.selection.arms must name known arms ({sorted(STRATEGIES)}), got {unknown}"
        )

    async def open_tenant(tenant: str) -> TenantLearning:
        learning_log = await LearningLog.open(settings.store_location, durability, tenant)
        learning = await LearningService.restore(
            learning_log,
            tuple(selectable),
            selection_config(settings.retrieval.selection, settings.limits.memory.learning_history),
            settings.retrieval.selection.recalibration_window_days * 24 * 3600,
        )
        tool_settings = settings.tools
        tools = await ToolService.open(
            await ToolStore.open(settings.store_location, durability, tenant),
            models,
            GeneratorTeacher(models, tenant, timeout_s=tool_settings.teacher_timeout_s)
            if tool_settings.teacher == "generator"
            else None,
            tool_settings,
            settings.limits.tools,
        )
        corpus_inquiry = await CorpusInquiryLearning.open(
            await CorpusInquiryLog.open(settings.store_location, durability, tenant)
        )
        return TenantLearning(
            learning, InquiryLearning(learning_log, store, corpus_inquiry, tenant), tools, corpus_inquiry
        )

    tenants = Tenants(open_tenant)
    await tenants.of(DEFAULT_TENANT)
    graphs = await GraphStore.open(settings.store_location)
    graph_builder = GraphBuilder(
        store, graphs, models, max_entities_per_chunk=settings.limits.corpus.graph_max_entities_per_chunk
    )
    retrieval = RetrievalService(
        store,
        executor,
        models,
        graphs,
        settings.retrieval.expansion,
        settings.retrieval.fusion_k,
        settings.limits.retrieve,
    )
    corpus = CorpusManager(store, models, graph_builder, executor.forget, settings.limits.corpus)

    limits = settings.limits
    policies = call_policies(limits)
    server = rpc.server(limits.transport)

    def inquiry_backend(session_id: str, tenant: str, domain: str) -> Models | CorpusTools:
        if domain == CorpusInquiry.name:
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
        return Models(
            models,
            flow=f"inquiry:{session_id}",
            in_flight=limits.inquiry.llm_generations_in_flight,
            tenant=tenant,
        )

    inquiry = InquiryService(store, inquiry_backend, limits.inquiry)
    sounding = SoundingServicer(
        retrieval,
        inquiry,
        tenants,
        limits.inquiry,
        limits.observe,
        limits.calibrate,
    )
    gate = admission.Gate(limits.transport.max_concurrent_rpcs)
    health_servicer = health.aio.HealthServicer()
    reflection_servicer = reflection.aio.ReflectionServicer(
        (*SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME), pool=public_descriptors()
    )
    open_budgets = admission.open_budgets(limits.transport)
    server.add_generic_rpc_handlers(
        (
            rpc.service_handler(
                SOUNDING_SERVICE, sounding, policies[SOUNDING_SERVICE.name], gate, authenticator
            ),
            rpc.service_handler(
                CORPUS_SERVICE, CorpusServicer(corpus), policies[CORPUS_SERVICE.name], gate, authenticator
            ),
            rpc.service_handler(
                TOOL_SERVICE, ToolServicer(tenants), policies[TOOL_SERVICE.name], gate, authenticator
            ),
            *(
                admission.open_service_handler(service, servicer, open_budgets, authenticator)
                for service, servicer in (
                    (HEALTH_SERVICE, health_servicer),
                    (REFLECTION_SERVICE, reflection_servicer),
                )
            ),
        )
    )
    readiness = Readiness(
        health_servicer,
        SERVICES,
        {
            "the models sidecar": models.check_serving,
            "the strategy workers": executor.calls_in_flight,
            "the token file": authenticator.check,
        },
        probe_timeout_s=settings.limits.deadlines.readiness_probe_s,
    )
    rpc.listen(server, settings.address, settings.tls)
    await server.start()
    expiry = asyncio.ensure_future(inquiry.expire_idle_sessions())
    try:
        await readiness.start()
        serving.set()
        log.info("orchestrator serving on %s (store %s)", settings.address, settings.store_location.uri)
        await graph_builder.catch_up()
        await stop.wait()
    finally:
        log.info("draining: %d calls in flight have %.0f s", gate.in_flight, limits.transport.drain_grace_s)
        await readiness.drain()
        if not await gate.drain(limits.transport.drain_grace_s):
            log.warning("drained: %d calls still in flight are cancelled", gate.in_flight)
        await server.stop(grace=1.0)
        expiry.cancel()
        with suppress(asyncio.CancelledError):
            await expiry
        inquiry.close()
        await executor.close()
        await tenants.close()
        await models.close()
        data_lock.release()
        telemetry.shutdown()
