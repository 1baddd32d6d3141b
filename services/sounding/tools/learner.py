"""The learning loop of tool routing (spec tool-selection-learning), off every call's path.

Observe records a batch of tool-use events durably and hands them to a bounded queue, returning at
once. One worker takes the queued events in batches: it embeds their requests, ranks each (the
ranker's top-1 and margin), detects mis-routes (a fallback tool used, or the used tool not the
top-1), labels each flagged request with the two-tier oracle (the ranker when its margin is at
least the floor, optionally the agent's own successful use, the teacher below the floor), saves
the confirmed (request -> tool) exemplars and refolds the centroids of the tools they touch, once
per batch. Requests for the teacher go to a lane of their own (bounded; a full lane drops the
request as a failed teacher would), so a slow teacher never holds the batches up.

Every processed event gets a label row (an unflagged one its used tool, agreed by the ranker), so
an event without one is still to be processed: a full queue leaves an event out (counted), and
the worker takes such events from the store once its queue is empty; a start does the same for
what a crash or a stop left unprocessed. No acknowledged event is lost to a full queue, and the
queue's memory stays bounded. With several orchestrators on the store, each one's worker takes up
what the others hold as well as its own leftovers; an event processed twice is counted once
(`store.tools`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from sounding.core.tool_routing import FlagReason, LabelTier, Route, detect, tier_for
from sounding.runtime import telemetry
from sounding.store.tools import ExemplarRecord, LabelRecord, ToolStore, ToolUseRecord
from sounding.tools.protocol import (
    MAX_TOOL_NAME_CHARS,
    AccuracyWindow,
    Embedder,
    RejectedUse,
    Teacher,
    ToolConfig,
    ToolMetrics,
    ToolUse,
)
from sounding.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

EMBED_ATTEMPTS = 3
TEACHERS_AT_ONCE = 4
DEFAULT_WINDOW = 100
# At most this many unprocessed events are read back from the store at a time.
BACKFILL_BATCH = 1024
# Event sequences reserved from the store at a time.
SEQUENCE_BLOCK = 256

_meter = telemetry.meter()
_events = _meter.create_counter("sounding.tools.events", description="tool-use events recorded")
_dropped = _meter.create_counter(
    "sounding.tools.dropped", description="tool-use events the full queue left to the store"
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


@dataclass(frozen=True)
class _TeacherRequest:
    record: ToolUseRecord
    route: Route
    flag: str
    vector: np.ndarray


class ToolLearner:
    def __init__(
        self,
        store: ToolStore,
        registry: ToolRegistry,
        embedder: Embedder,
        teacher: Teacher | None,
        config: ToolConfig,
    ):
        self._store = store
        self._registry = registry
        self._embedder = embedder
        self._teacher = teacher
        self._settings = config.settings
        self._limits = config.limits
        self._queue: asyncio.Queue[ToolUseRecord] = asyncio.Queue(config.limits.learner_queue)
        # Bounded by `limits.teacher_queue` through `_with_teacher`: the events asked or waiting.
        self._teacher_lane: asyncio.Queue[_TeacherRequest] = asyncio.Queue()
        self._with_teacher = 0
        # Sequences of the events the learner holds (being written, queued, in a batch or with
        # the teacher): the store's unlabelled events less these are the ones left out.
        self._held: set[int] = set()
        self._behind = True  # unlabelled events may be in the store that nothing holds
        self._reading = False  # the worker is reading them back
        # The block of event sequences reserved in the store and not yet given out.
        self._sequences: range = range(0)
        self._after = -1  # the highest sequence recorded before this process started
        self._reserving = asyncio.Lock()
        self._tasks: list[asyncio.Task] = []
        self.dropped = 0

    async def start(self) -> None:
        """Start the worker (which first takes up what the store holds unprocessed) and the
        teacher's lane."""
        self._after = await self._store.last_sequence()
        self._tasks = [asyncio.create_task(self._work(), name="tool-learner")] + [
            asyncio.create_task(self._teach(), name=f"tool-teacher-{i}") for i in range(TEACHERS_AT_ONCE)
        ]

    async def close(self) -> None:
        """Stop the worker and the teacher's lane; what they held is processed after the next start."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def idle(self) -> None:
        """Wait until every event recorded so far has been processed (tests and evaluations)."""
        while True:
            await self._queue.join()
            await self._teacher_lane.join()
            if not self._behind and not self._reading and self._queue.empty():
                return
            await asyncio.sleep(0.01)

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

    async def _take_sequences(self, count: int) -> list[int]:
        """`count` event sequences no other process gives out (reserved from the store in blocks)."""
        async with self._reserving:
            if len(self._sequences) < count:
                self._sequences = await self._store.reserve_sequences(max(count, SEQUENCE_BLOCK), self._after)
            taken, self._sequences = self._sequences[:count], self._sequences[count:]
            return list(taken)

    async def observe(self, uses: Sequence[tuple[int, ToolUse]]) -> tuple[int, list[RejectedUse]]:
        """Record the events (by stream position) durably in one commit and queue them for the
        worker; (recorded, rejected)."""
        rejected, accepted = [], []
        for index, use in uses:
            refusal = self._reject(index, use)
            if refusal is None:
                accepted.append(use)
            else:
                rejected.append(refusal)
        records = []
        for use, sequence in zip(accepted, await self._take_sequences(len(accepted)), strict=True):
            records.append(
                ToolUseRecord(
                    sequence=sequence,
                    toolset=use.toolset,
                    request=use.request,
                    used_tool=use.used_tool,
                    offered_tools=use.offered_tools,
                    success=use.success,
                )
            )
        if records:
            sequences = {r.sequence for r in records}
            self._held |= sequences
            try:
                await self._store.append_events(records)
            except BaseException:
                self._held -= sequences
                raise
            _events.add(len(records))
            for record in records:
                self._enqueue(record)
        return len(records), rejected

    def _enqueue(self, record: ToolUseRecord) -> None:
        try:
            self._queue.put_nowait(record)
        except asyncio.QueueFull:
            self._held.discard(record.sequence)
            self._behind = True
            self.dropped += 1
            _dropped.add(1)

    async def _backfill(self) -> None:
        """Queue what the store holds unprocessed (the queue is empty and the worker waiting)."""
        limit = min(self._limits.learner_queue, BACKFILL_BATCH)
        self._behind = False  # an event left out while the store is read sets it again
        self._reading = True
        try:
            records = await self._store.unlabelled_events(limit, self._held)
        finally:
            self._reading = False
        if len(records) == limit:
            self._behind = True
        for record in records:
            self._held.add(record.sequence)
            self._enqueue(record)  # Observe may have filled the queue meanwhile

    async def _work(self) -> None:
        while True:
            if self._behind and self._queue.empty():
                try:
                    await self._backfill()
                except Exception:
                    log.exception("the tool learner could not read unprocessed events back; retrying")
                    self._behind = True
                    await asyncio.sleep(1.0)
                    continue
            batch = [await self._queue.get()]
            while len(batch) < self._settings.batch_size and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._process(batch)
            except Exception:
                log.exception(
                    "the tool learner could not process %d events; they are taken up again later",
                    len(batch),
                )
                await asyncio.sleep(1.0)
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
        """Label the batch (its teacher-tier events go to the teacher's lane); on a failure, the
        events not handed to the teacher are released, for the store to give back later."""
        with_teacher: set[int] = set()
        try:
            await self._label(batch, with_teacher)
        except BaseException:
            self._held -= {r.sequence for r in batch} - with_teacher
            self._behind = True
            raise

    async def _label(self, batch: list[ToolUseRecord], with_teacher: set[int]) -> None:
        vectors = await self._embed([r.request for r in batch])
        settings = self._settings
        fallbacks = set(settings.fallback_tools)
        labelled: list[tuple[ToolUseRecord, np.ndarray, Route, str, str, str]] = []
        for record, vector in zip(batch, vectors, strict=True):
            route = self._registry.rank(
                record.toolset, vector, settings.teacher_candidates, record.offered_tools
            )
            flag = detect(record.used_tool, route, fallbacks)
            if flag == FlagReason.NONE:
                labelled.append((record, vector, route, flag, "", record.used_tool if route.ok else ""))
                continue
            tier = tier_for(
                route,
                settings.margin_floor,
                record.used_tool,
                record.success,
                self._registry.registered(record.toolset),
                fallbacks,
                settings.trust_successful_uses,
            )
            if tier == LabelTier.TEACHER and self._teacher is not None:
                if self._with_teacher < self._limits.teacher_queue:
                    self._with_teacher += 1
                    self._teacher_lane.put_nowait(_TeacherRequest(record, route, flag, vector))
                    with_teacher.add(record.sequence)
                    continue
                # The lane is full: dropped, as a failed teacher's event is (label "").
            label = {LabelTier.TRUSTED: record.used_tool, LabelTier.FREE: route.top1}.get(tier, "")
            labelled.append((record, vector, route, flag, tier, label))
        await self._save(labelled)

    async def _save(self, labelled: Sequence[tuple[ToolUseRecord, np.ndarray, Route, str, str, str]]) -> None:
        """Write the events' labels and the exemplars of the flagged ones, then refold."""
        label_rows, exemplars = [], []
        for record, vector, route, flag, tier, label in labelled:
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
        saved = await self._store.append_learned(label_rows, exemplars)
        self._held -= {record.sequence for record, *_ in labelled}
        if saved:
            before = self._registry.refresh_seconds
            self._registry.add_exemplars(saved)
            _refold.record(self._registry.refresh_seconds - before)

    async def _teach(self) -> None:
        """One of the teacher lane's workers: label a flagged low-margin event and save it."""
        while True:
            asked = await self._teacher_lane.get()
            try:
                label = await self._ask_teacher(asked.record, asked.route)
                await self._save(
                    [(asked.record, asked.vector, asked.route, asked.flag, LabelTier.TEACHER, label)]
                )
            except Exception:
                log.exception("the tool learner could not save tool-use event %d", asked.record.sequence)
                self._held.discard(asked.record.sequence)
                self._behind = True
            finally:
                self._with_teacher -= 1
                self._teacher_lane.task_done()

    async def _ask_teacher(self, record: ToolUseRecord, route: Route) -> str:
        """The teacher's label ("" when it declines, fails or is too slow)."""
        assert self._teacher is not None
        registered: Collection[str] = self._registry.registered(record.toolset)
        fallbacks = set(self._settings.fallback_tools)
        names = [name for name, _ in route.candidates if name in registered]
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
            flagged_share=(flags.count(FlagReason.FALLBACK) + flags.count(FlagReason.DISAGREEMENT))
            / len(labels)
            if labels
            else 0.0,
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
            untrusted_exemplars_route=self._registry.untrusted_route(toolset),
        )
