"""What the orchestrator's gRPC server serves: the public services and their servicers, each
method's call policy, and health and reflection (reflection of the public API only). The
process that serves them is wired in `assembly.orchestrator`."""

from __future__ import annotations

from typing import cast

import grpc
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool
from grpc_health.v1 import health, health_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2
from sounding_api.sounding.v1 import corpus_pb2, sounding_pb2, tools_pb2

from sounding.gateway.servicers import CorpusServicer, SoundingServicer, ToolServicer
from sounding.serving import admission, auth, rpc
from sounding.settings.limits import LimitsSettings

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


def handlers(
    sounding: SoundingServicer,
    corpus: CorpusServicer,
    tools: ToolServicer,
    health_servicer: health.aio.HealthServicer,
    limits: LimitsSettings,
    gate: admission.Gate,
    authenticator: auth.Authenticator,
) -> tuple[grpc.GenericRpcHandler, ...]:
    """The server's handlers: the public services under their call policies and the `gate`,
    health and reflection on the budget of callers without a token."""
    policies = call_policies(limits)
    reflection_servicer = reflection.aio.ReflectionServicer(
        (*SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME), pool=public_descriptors()
    )
    open_budgets = admission.open_budgets(limits.transport)
    return (
        rpc.service_handler(SOUNDING_SERVICE, sounding, policies[SOUNDING_SERVICE.name], gate, authenticator),
        rpc.service_handler(CORPUS_SERVICE, corpus, policies[CORPUS_SERVICE.name], gate, authenticator),
        rpc.service_handler(TOOL_SERVICE, tools, policies[TOOL_SERVICE.name], gate, authenticator),
        *(
            admission.open_service_handler(service, servicer, open_budgets, authenticator)
            for service, servicer in (
                (HEALTH_SERVICE, health_servicer),
                (REFLECTION_SERVICE, reflection_servicer),
            )
        ),
    )
