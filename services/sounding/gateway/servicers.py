"""SoundingService, CorpusService and ToolService servicers: each method converts its request, delegates, and
converts what comes back (registered through `sounding.serving.rpc.service_handler`, which adds the
limits, deadlines, spans and error statuses). A service's event stream is closed however the
response stream ends, so nothing it holds (a calibration's lock) outlives the call."""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass

from sounding_api.sounding.v1 import corpus_pb2, sounding_pb2, tools_pb2

from sounding.corpus.service import CorpusManager
from sounding.gateway.convert import corpus as corpus_messages
from sounding.gateway.convert import inquiry as inquiry_messages
from sounding.gateway.convert import learning as learning_messages
from sounding.gateway.convert import retrieval as retrieval_messages
from sounding.gateway.convert import tools as tool_messages
from sounding.inquiry.service import InquiryService
from sounding.learning.tenants import Tenants
from sounding.retrieval.service import RetrievalService
from sounding.runtime import errors
from sounding.settings.limits import ObserveLimits
from sounding.store.tenancy import ResourceRef, checked_name


@dataclass(frozen=True)
class SoundingServicerConfig:
    """The limits the servicer checks while it converts requests: an InquiryStart's serialized
    size, an Observe stream's, and a Calibrate request's inline states."""

    max_inquiry_start_bytes: int
    observe: ObserveLimits
    max_calibrate_inline_states: int


class SoundingServicer:
    """Every call acts for the caller's tenant, with that tenant's learned state (`tenants`)."""

    def __init__(
        self,
        retrieval: RetrievalService,
        inquiry: InquiryService,
        tenants: Tenants,
        config: SoundingServicerConfig,
    ):
        self._retrieval = retrieval
        self._inquiry = inquiry
        self._tenants = tenants
        self._config = config

    async def Retrieve(self, request, context):
        tenant = context.principal.tenant
        query = retrieval_messages.retrieve_query(request, tenant, context.time_remaining())
        learning = (await self._tenants.of(tenant)).retrieval
        async with aclosing(self._retrieval.retrieve(query, learning)) as events:
            async for event in events:
                yield retrieval_messages.retrieve_response(event)

    async def Inquire(self, request_iterator, context):
        async def requests():
            async for message in request_iterator:
                yield inquiry_messages.inquiry_request(message, self._config.max_inquiry_start_bytes)

        tenant = context.principal.tenant
        thresholds = (await self._tenants.of(tenant)).inquiry.thresholds
        async with aclosing(self._inquiry.run(requests(), tenant, thresholds)) as events:
            async for event in events:
                yield inquiry_messages.inquire_response(event)

    async def Observe(self, request_iterator, context):
        observations = []
        size, limits = 0, self._config.observe
        async for message in request_iterator:
            size += message.ByteSize()
            carried = len(message.batch.observations) if message.WhichOneof("observation") == "batch" else 1
            if len(observations) + carried > limits.max_messages or size > limits.max_stream_bytes:
                # The first observation past a limit: this message's first, or the one past the count.
                over = len(observations) if size > limits.max_stream_bytes else limits.max_messages
                raise errors.ResourceExhausted(
                    f"an Observe stream carries at most {limits.max_messages} observations and "
                    f"{limits.max_stream_bytes} bytes; nothing of this stream was recorded",
                    reason="OBSERVE_STREAM_TOO_LONG",
                    field=f"messages[{over}]",
                )
            observations += learning_messages.observations(message, len(observations), limits)
        learned = await self._tenants.of(context.principal.tenant)
        return learning_messages.observe_response(await learned.observe(observations))

    async def Calibrate(self, request, context):
        target = request.target
        learned = await self._tenants.of(context.principal.tenant)
        if target == sounding_pb2.CALIBRATION_TARGET_BANDIT:
            events = learned.retrieval.recalibrate()
        elif target == sounding_pb2.CALIBRATION_TARGET_MISS_RATE:
            events = learned.retrieval.calibrate_miss_rate()
        elif target == sounding_pb2.CALIBRATION_TARGET_CONFIDENCE:
            events = learned.retrieval.calibrate_confidence()
        elif target == sounding_pb2.CALIBRATION_TARGET_QUERY_ADAPTER:
            if not request.collection:
                raise errors.InvalidArgument(
                    "Calibrate(QUERY_ADAPTER) needs the collection", field="collection"
                )
            collection = ResourceRef.named(context.principal.tenant, request.collection, "collection")
            source = await self._retrieval.query_adapter_source(collection)
            events = learned.retrieval.query_adapters.calibrate(*source)
        elif target == sounding_pb2.CALIBRATION_TARGET_STOP_THRESHOLD:
            events = learned.inquiry.calibrate(
                learning_messages.stop_threshold_request(request, self._config.max_calibrate_inline_states)
            )
        else:
            name = sounding_pb2.CalibrationTarget.Name(target)
            raise errors.Unimplemented(f"Calibrate for {name} is not implemented yet")
        async with aclosing(events):
            async for event in events:
                yield learning_messages.calibrate_response(event)

    async def GetStrategyMetrics(self, request, context):
        learned = await self._tenants.of(context.principal.tenant)
        return learning_messages.strategy_metrics(
            await learned.retrieval.metrics(), learned.corpus_inquiry.metrics()
        )


class CorpusServicer:
    def __init__(self, corpus: CorpusManager):
        self._corpus = corpus

    async def CreateCollection(self, request, context):
        collection = ResourceRef.named(context.principal.tenant, request.name, "name")
        info = await self._corpus.create(collection, request.description)
        _, stats = await self._corpus.get(collection)
        return corpus_pb2.CreateCollectionResponse(collection=corpus_messages.collection(info, stats))

    async def GetCollection(self, request, context):
        collection = ResourceRef.named(context.principal.tenant, request.name, "name")
        info, stats = await self._corpus.get(collection)
        return corpus_pb2.GetCollectionResponse(collection=corpus_messages.collection(info, stats))

    async def ListCollections(self, request, context):
        if request.page_token:
            checked_name(request.page_token, "page_token")
        page, token = await self._corpus.list(context.principal.tenant, request.page_size, request.page_token)
        return corpus_pb2.ListCollectionsResponse(
            collections=[corpus_messages.collection(i, s) for i, s in page], next_page_token=token
        )

    async def DeleteCollection(self, request, context):
        await self._corpus.delete(ResourceRef.named(context.principal.tenant, request.name, "name"))
        return corpus_pb2.DeleteCollectionResponse()

    async def IngestDocuments(self, request_iterator, context):
        tenant = context.principal.tenant

        async def batches():
            async for request in request_iterator:
                named = request.collection and ResourceRef.named(tenant, request.collection, "collection")
                yield named or None, corpus_messages.documents(request)

        progress = self._corpus.ingest(batches(), context.time_remaining)
        async with aclosing(progress):
            async for written in progress:
                yield corpus_messages.ingest_progress(written)


class ToolServicer:
    """Every call acts on the caller's tenant's toolsets."""

    def __init__(self, tenants: Tenants):
        self._tenants = tenants

    async def _tools(self, context):
        return (await self._tenants.of(context.principal.tenant)).tools

    async def PutTools(self, request, context):
        tools = await self._tools(context)
        version, count = await tools.put(request.toolset, tool_messages.tool_specs(request))
        return tools_pb2.PutToolsResponse(version=version, tool_count=count)

    async def DeleteTools(self, request, context):
        tools = await self._tools(context)
        version, count = await tools.delete(request.toolset, list(request.names), request.forget_exemplars)
        return tools_pb2.DeleteToolsResponse(version=version, tool_count=count)

    async def ListTools(self, request, context):
        tools = await self._tools(context)
        page, token, version = tools.list(request.toolset, request.page_size, request.page_token)
        return tools_pb2.ListToolsResponse(
            tools=[tool_messages.tool(t) for t in page], next_page_token=token, version=version
        )

    async def RouteTool(self, request, context):
        tools = await self._tools(context)
        route, version = await tools.route(
            request.toolset, request.request, request.top_k, list(request.offered_tools)
        )
        return tool_messages.route_response(route, version)

    async def GetToolMetrics(self, request, context):
        metrics = await (await self._tools(context)).metrics(request.toolset, request.window)
        return tool_messages.metrics_response(metrics)
