"""The learning loop of tool routing (spec tool-selection-learning), off every call's path.

Observe records a batch of tool-use events durably and hands them to a bounded queue, returning at
once; a full queue drops an event (counted, and it stays recorded). One worker takes the queued
events in batches: it embeds their requests, ranks each (the ranker's top-1 and margin), detects
mis-routes (a fallback tool used, or the used tool not the top-1), labels each flagged request
with the two-tier oracle (the ranker when its margin is at least the floor, the teacher below it,
or optionally the agent's own successful use), saves the confirmed (request -> tool) exemplars and
refolds the centroids of the tools they touch, once per batch.

Every processed event gets a label row (unflagged ones the used tool, agreed by the ranker), so a
start resumes after the last labelled event: events recorded but not processed before a crash
are processed then (as many as the queue holds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import numpy as np

from sounding import telemetry
from sounding.config import ToolSettings
from sounding.core.tool_routing import FlagReason, LabelTier, Route, detect, tier_for
from sounding.limits import ToolLimits
from sounding.store.tools import ExemplarRecord, LabelRecord, ToolStore, ToolUseRecord
from sounding.tools.protocol import (
    MAX_TOOL_NAME_CHARS,
    AccuracyWindow,
    Embedder,
    RejectedUse,
    Teacher,
    ToolMetrics,
    ToolUse,
)
from sounding.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

EMBED_ATTEMPTS = 3
TEACHERS_AT_ONCE = 4
DEFAULT_WINDOW = 100

_meter = telemetry.meter()
_events = _meter.create_counter("sounding.tools.events", description="tool-use events recorded")
_dropped = _meter.create_counter(
    "sounding.tools.dropped", description="tool-use events the full queue dropped"
)
_flagged = _meter.create_counter(
    "sounding.tools.flagged", description="processed events flagged as mis-routes"
)
_labels = _meter.create_counter("sounding.tools.labels", description="flagged events labelled, by tier")
_routes = _meter.create_counter(
    "sounding.tools.route_checks", description="labelled events, by whether the ranker's top-1 was the label"
)
_refold = _meter.create_histogram(
    "sounding.tools.refold.duration", unit="s", description="refolding centroids after a batch"
)


class ToolLearner:
    def __init__(
        self,
        store: ToolStore,
        registry: ToolRegistry,
        embedder: Embedder,
        teacher: Teacher | None,
        settings: ToolSettings,
        limits: ToolLimits,
    ):
        self._store = store
        self._registry = registry
        self._embedder = embedder
        self._teacher = teacher
        self._settings = settings
        self._limits = limits
        self._queue: asyncio.Queue[ToolUseRecord] = asyncio.Queue(limits.learner_queue)
        self._next_sequence = 0
        self._worker: asyncio.Task | None = None
        self._teachers = asyncio.Semaphore(TEACHERS_AT_ONCE)
        self.dropped = 0

    async def start(self) -> None:
        """Resume after the last processed event, then start the worker."""
        self._next_sequence = await self._store.last_sequence() + 1
        pending = await self._store.events_after(
            await self._store.last_labelled_sequence(), self._limits.learner_queue
        )
        for record in pending:
            self._enqueue(record)
        self._worker = asyncio.create_task(self._work(), name="tool-learner")

    async def close(self) -> None:
        """Stop the worker; events still queued are processed after the next start."""
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None

    async def idle(self) -> None:
        """Wait until every queued event has been processed (tests and evaluations)."""
        await self._queue.join()

    def _reject(self, index: int, use: ToolUse) -> RejectedUse | None:
        limits = self._limits
        if len(use.request) > limits.max_request_chars:
            return RejectedUse(
                index, "INVALID_ARGUMENT", f"tool_use.request: at most {limits.max_request_chars} characters"
            )
        if len(use.used_tool) > MAX_TOOL_NAME_CHARS:
            return RejectedUse(
                index, "INVALID_ARGUMENT", f"tool_use.used_tool: at most {MAX_TOOL_NAME_CHARS} characters"
            )
        if len(use.offered_tools) > limits.max_offered_tools:
            return RejectedUse(
                index, "INVALID_ARGUMENT", f"tool_use.offered_tools: at most {limits.max_offered_tools} tools"
            )
        if not self._registry.has(use.toolset):
            return RejectedUse(
                index, "NOT_FOUND", f"tool_use.toolset: toolset {use.toolset!r} does not exist"
            )
        return None

    async def observe(self, uses: Sequence[tuple[int, ToolUse]]) -> tuple[int, list[RejectedUse]]:
        """Record the events (by stream position) durably in one commit and queue them for the
        worker; (recorded, rejected)."""
        rejected, records = [], []
        for index, use in uses:
            refusal = self._reject(index, use)
            if refusal is not None:
                rejected.append(refusal)
                continue
            records.append(
                ToolUseRecord(
                    sequence=self._next_sequence,
                    toolset=use.toolset,
                    request=use.request,
                    used_tool=use.used_tool,
                    offered_tools=use.offered_tools,
                    success=use.success,
                )
            )
            self._next_sequence += 1
        if records:
            await self._store.append_events(records)
            _events.add(len(records))
            for record in records:
                self._enqueue(record)
        return len(records), rejected

    def _enqueue(self, record: ToolUseRecord) -> None:
        try:
            self._queue.put_nowait(record)
        except asyncio.QueueFull:
            self.dropped += 1
            _dropped.add(1)

    async def _work(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._settings.batch_size and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._process(batch)
            except Exception:
                log.exception(
                    "the tool learner could not process %d events; they are left unlabelled", len(batch)
                )
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _embed(self, texts: list[str]) -> np.ndarray:
        for attempt in range(EMBED_ATTEMPTS):
            try:
                return await self._embedder.embed(texts)
            except Exception:
                if attempt == EMBED_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(2**attempt)
        raise AssertionError("unreachable")

    async def _process(self, batch: list[ToolUseRecord]) -> None:
        vectors = await self._embed([r.request for r in batch])
        settings = self._settings
        fallbacks = set(settings.fallback_tools)
        routes = [
            self._registry.rank(r.toolset, v, settings.teacher_candidates, r.offered_tools)
            for r, v in zip(batch, vectors, strict=True)
        ]
        labels = await asyncio.gather(
            *(self._label(r, route, fallbacks) for r, route in zip(batch, routes, strict=True))
        )
        label_rows, exemplars = [], []
        for record, vector, route, (flag, tier, label) in zip(batch, vectors, routes, labels, strict=True):
            label_rows.append(
                LabelRecord(
                    sequence=record.sequence,
                    toolset=record.toolset,
                    used_tool=record.used_tool,
                    top1=route.top1,
                    margin=route.margin,
                    flag=flag,
                    tier=tier,
                    label=label,
                )
            )
            if flag != FlagReason.NONE:
                _flagged.add(1, {"sounding.tools.flag": flag})
                if label:
                    _labels.add(1, {"sounding.tools.tier": tier})
            if label:
                _routes.add(1, {"sounding.tools.correct": route.top1 == label})
            if flag != FlagReason.NONE and label and label in self._registry.registered(record.toolset):
                exemplars.append(
                    ExemplarRecord(
                        sequence=record.sequence,
                        toolset=record.toolset,
                        tool=label,
                        request=record.request,
                        tier=tier,
                        embedding=vector,
                    )
                )
        await self._store.append_learned(label_rows, exemplars)
        if exemplars:
            before = self._registry.refresh_seconds
            self._registry.add_exemplars(exemplars)
            _refold.record(self._registry.refresh_seconds - before)

    async def _label(self, record: ToolUseRecord, route: Route, fallbacks: set[str]) -> tuple[str, str, str]:
        """(flag, tier, label) of one event: an unflagged event's label is its used tool; a
        flagged one's the oracle's ("" when the teacher declines, fails or is off)."""
        flag = detect(record.used_tool, route, fallbacks)
        if flag == FlagReason.NONE:
            return flag, "", record.used_tool if route.ok else ""
        registered = self._registry.registered(record.toolset)
        tier = tier_for(
            route,
            self._settings.margin_floor,
            record.used_tool,
            record.success,
            registered,
            fallbacks,
            self._settings.trust_successful_uses,
        )
        if tier == LabelTier.TRUSTED:
            return flag, tier, record.used_tool
        if tier == LabelTier.FREE:
            return flag, tier, route.top1
        return flag, tier, await self._ask_teacher(record, route, registered, fallbacks)

    async def _ask_teacher(self, record: ToolUseRecord, route: Route, registered, fallbacks: set[str]) -> str:
        if self._teacher is None:
            return ""
        names = [name for name, _ in route.candidates]
        if (
            record.used_tool in registered
            and record.used_tool not in fallbacks
            and record.used_tool not in names
        ):
            names.append(record.used_tool)
        if not names:
            return ""
        candidates = [(n, self._registry.description(record.toolset, n)) for n in names]
        try:
            async with self._teachers:
                label = await asyncio.wait_for(
                    self._teacher.label(record.request, candidates), self._settings.teacher_timeout_s
                )
        except Exception as error:
            log.warning("the teacher failed on tool-use event %d: %s", record.sequence, error)
            return ""
        return label or ""

    async def metrics(self, toolset: str, window: int) -> ToolMetrics:
        """The learning loop's figures for one toolset (labels read from the store)."""
        version, tools = self._registry.summary(toolset)
        labels = (await self._store.labels(toolset)).to_pylist()
        flags = [r["flag"] for r in labels]
        flagged_tiers = [r["tier"] for r in labels if r["flag"] != FlagReason.NONE and r["label"]]
        labelled = [r for r in labels if r["label"]]
        size = window or DEFAULT_WINDOW
        windows = []
        for start in range(0, len(labels), size):
            part = labels[start : start + size]
            judged = [r for r in part if r["label"]]
            windows.append(
                AccuracyWindow(
                    part[0]["sequence"],
                    part[-1]["sequence"],
                    len(judged),
                    sum(r["top1"] == r["label"] for r in judged) / len(judged) if judged else 0.0,
                )
            )
        refreshes = self._registry.refreshes
        return ToolMetrics(
            version=version,
            tool_count=tools,
            events=await self._store.event_count(toolset),
            processed=len(labels),
            flagged_fallback=flags.count(FlagReason.FALLBACK),
            flagged_disagreement=flags.count(FlagReason.DISAGREEMENT),
            labels_free=flagged_tiers.count(LabelTier.FREE),
            labels_teacher=flagged_tiers.count(LabelTier.TEACHER),
            labels_trusted=flagged_tiers.count(LabelTier.TRUSTED),
            teacher_dropped=sum(r["tier"] == LabelTier.TEACHER and not r["label"] for r in labels),
            accuracy=sum(r["top1"] == r["label"] for r in labelled) / len(labelled) if labelled else 0.0,
            accuracy_windows=tuple(windows),
            exemplars=self._registry.exemplar_counts(toolset),
            dropped_since_start=self.dropped,
            refreshes_since_start=refreshes,
            mean_refresh_seconds=self._registry.refresh_seconds / refreshes if refreshes else 0.0,
        )
