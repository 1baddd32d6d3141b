"""SoundingService and CorpusService servicers: each method converts its request, delegates, and
converts what comes back (registered through `sounding.rpc.service_handler`, which adds the
limits, deadlines, spans and error statuses)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from sounding_client.api.sounding.v1 import corpus_pb2, sounding_pb2

from sounding import errors
from sounding.config import CalibrateLimits, InquiryLimits, ObserveLimits
from sounding.corpus.service import CorpusManager, validate_collection_name
from sounding.gateway import convert
from sounding.inquiry.service import InquiryService
from sounding.learning.inquiry import InquiryOutcome
from sounding.learning.service import ObserveResult, Rejected, RetrievalOutcome
from sounding.learning.tenants import Tenants
from sounding.retrieval.service import RetrievalService


class SoundingServicer:
    """Every call acts for the caller's tenant, with that tenant's learned state (`tenants`)."""

    def __init__(
        self,
        retrieval: RetrievalService,
        inquiry: InquiryService,
        tenants: Tenants,
        inquiry_limits: InquiryLimits = InquiryLimits(),
        observe_limits: ObserveLimits = ObserveLimits(),
        calibrate_limits: CalibrateLimits = CalibrateLimits(),
    ):
        self._retrieval = retrieval
        self._inquiry = inquiry
        self._tenants = tenants
        self._inquiry_limits = inquiry_limits
        self._observe_limits = observe_limits
        self._calibrate_limits = calibrate_limits

    async def Retrieve(self, request, context):
        tenant = context.principal.tenant
        query = replace(convert.retrieve_query(request, context.time_remaining()), tenant=tenant)
        learning = (await self._tenants.of(tenant)).retrieval
        async for event in self._retrieval.retrieve(query, learning):
            yield convert.retrieve_response(event)

    async def Inquire(self, request_iterator, context):
        async def requests():
            async for message in request_iterator:
                yield convert.inquiry_request(message, self._inquiry_limits.max_start_bytes)

        tenant = context.principal.tenant
        thresholds = (await self._tenants.of(tenant)).inquiry.thresholds
        async for event in self._inquiry.run(requests(), tenant, thresholds):
            yield convert.inquire_response(event)

    async def Observe(self, request_iterator, context):
        observations = []
        size, limits = 0, self._observe_limits
        async for message in request_iterator:
            size += message.ByteSize()
            if len(observations) >= limits.max_messages or size > limits.max_stream_bytes:
                raise errors.ResourceExhausted(
                    f"an Observe stream carries at most {limits.max_messages} observations and "
                    f"{limits.max_stream_bytes} bytes; nothing of this stream was recorded",
                    reason="OBSERVE_STREAM_TOO_LONG",
                    field=f"messages[{len(observations)}]",
                )
            observations.append(convert.observation(message, len(observations), limits))
        learned = await self._tenants.of(context.principal.tenant)
        inquiries = [(i, o) for i, o in enumerate(observations) if isinstance(o, InquiryOutcome)]
        positions = [i for i, o in enumerate(observations) if isinstance(o, RetrievalOutcome)]
        outcomes = [observations[i] for i in positions]
        retrievals = await learned.retrieval.observe(outcomes) if outcomes else ObserveResult(0, [])
        recorded, rejected = await learned.inquiry.observe(inquiries) if inquiries else (0, [])
        rejected += [o for o in observations if isinstance(o, Rejected)]  # at their stream positions
        # The retrieval side numbers its rejections within `outcomes`: back to stream positions.
        rejected += [replace(r, index=positions[r.index]) for r in retrievals.rejected]
        return convert.observe_response(
            ObserveResult(retrievals.recorded + recorded, sorted(rejected, key=lambda r: r.index))
        )

    async def Calibrate(self, request, context):
        target = convert.calibration_target(request)
        learned = await self._tenants.of(context.principal.tenant)
        if target == sounding_pb2.CALIBRATION_TARGET_BANDIT:
            events = learned.retrieval.recalibrate()
        elif target == sounding_pb2.CALIBRATION_TARGET_MISS_RATE:
            events = learned.retrieval.calibrate_miss_rate()
        elif target == sounding_pb2.CALIBRATION_TARGET_STOP_THRESHOLD:
            events = learned.inquiry.calibrate(
                convert.stop_threshold_request(request, self._calibrate_limits.max_inline_states)
            )
        else:
            name = sounding_pb2.CalibrationTarget.Name(target)
            raise errors.Unimplemented(f"Calibrate for {name} is not implemented yet")
        async for event in events:
            yield convert.calibrate_response(event)

    async def GetStrategyMetrics(self, request, context):
        learned = await self._tenants.of(context.principal.tenant)
        return convert.strategy_metrics(await learned.retrieval.metrics())


class CorpusServicer:
    def __init__(self, corpus: CorpusManager):
        self._corpus = corpus

    async def CreateCollection(self, request, context):
        tenant = context.principal.tenant
        info = await self._corpus.create(tenant, request.name, request.description)
        _, stats = await self._corpus.get(tenant, info.name)
        return corpus_pb2.CreateCollectionResponse(collection=convert.collection(info, stats))

    async def GetCollection(self, request, context):
        info, stats = await self._corpus.get(context.principal.tenant, request.name)
        return corpus_pb2.GetCollectionResponse(collection=convert.collection(info, stats))

    async def ListCollections(self, request, context):
        page, token = await self._corpus.list(context.principal.tenant, request.page_size, request.page_token)
        return corpus_pb2.ListCollectionsResponse(
            collections=[convert.collection(i, s) for i, s in page], next_page_token=token
        )

    async def DeleteCollection(self, request, context):
        await self._corpus.delete(context.principal.tenant, request.name)
        return corpus_pb2.DeleteCollectionResponse()

    async def IngestDocuments(self, request_iterator, context):
        """Batches are prepared (validated, chunked, embedded) while the previous one is being
        written, and acknowledged in order once written."""
        started = time.perf_counter()
        tenant = context.principal.tenant
        collection = ""
        totals = [0, 0]
        writing: asyncio.Task | None = None
        batch_index = 0

        async def acknowledge(task: asyncio.Task, index: int):
            written = await task
            totals[0] += written.documents
            totals[1] += written.chunks
            return corpus_pb2.IngestDocumentsResponse(
                batch_index=index,
                batch_documents=written.documents,
                batch_chunks=written.chunks,
                total_documents=totals[0],
                total_chunks=totals[1],
                elapsed_seconds=time.perf_counter() - started,
            )

        try:
            async for request in request_iterator:
                if not collection:
                    collection = request.collection
                    validate_collection_name(collection, "collection")
                elif request.collection not in ("", collection):
                    raise errors.InvalidArgument(
                        f"one stream ingests into one collection ({collection!r}); batch "
                        f"{batch_index} names {request.collection!r}",
                        field="collection",
                    )
                try:
                    prepared = await self._corpus.prepare_batch(
                        tenant, collection, convert.documents(request), context.time_remaining()
                    )
                except errors.InvalidArgument as error:
                    if writing is not None:
                        yield await acknowledge(writing, batch_index - 1)
                        writing = None
                    raise type(error)(
                        f"batch {batch_index}: {error.message}; nothing of this batch was written",
                        reason=error.reason,
                        field=error.field,
                    ) from None
                if writing is not None:
                    yield await acknowledge(writing, batch_index - 1)
                writing = asyncio.ensure_future(self._corpus.write_batch(tenant, collection, prepared))
                batch_index += 1
            if writing is not None:
                yield await acknowledge(writing, batch_index - 1)
                writing = None
        finally:
            if writing is not None:  # the stream failed or was cancelled: let the commit settle
                await asyncio.gather(writing, return_exceptions=True)
            if batch_index:
                self._corpus.ingestion_ended(tenant, collection)
