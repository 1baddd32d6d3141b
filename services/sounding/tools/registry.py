"""A tenant's toolsets: their tools (from its ToolStore), each tool's latest exemplars, and the
centroid bank folded from them (core.tool_routing) that ranks the tools for a request."""

from __future__ import annotations

import asyncio
import heapq
import json
import re
import time
from collections import deque
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from sounding.core.tool_routing import CentroidBank, LabelTier, Route, fold, untrusted_labels_validate
from sounding.runtime import errors
from sounding.runtime.following import SeenStamps
from sounding.store.tools import ExemplarRecord, ToolRecord, ToolStore
from sounding.tools.protocol import Embedder, ToolConfig, ToolInfo, ToolSpec

DEFAULT_TOP_K = 5
DEFAULT_PAGE_SIZE = 100
# The latest this many trusted uses of a toolset held back from the fold validate its untrusted
# exemplars.
HELD_BACK_USES = 256


def tool_text(name: str, description: str, parameters_json: str) -> str:
    """What a tool's description embedding is of: its name in words (`get_weather.v2` ->
    "get weather v2", camel case split), its description and its parameters' names."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", re.sub(r"[_.:/-]+", " ", name)).strip()
    parameters = ""
    if parameters_json:
        properties = json.loads(parameters_json).get("properties")
        if isinstance(properties, dict) and properties:
            parameters = " Parameters: " + ", ".join(str(p) for p in properties) + "."
    return f"{words}: {description}{parameters}"


def _held_back(sequence: int) -> bool:
    """Whether a trusted use validates the untrusted exemplars rather than joining their banks
    (every other event: the same on every process and after a restart)."""
    return sequence % 2 == 1


@dataclass(frozen=True)
class _Folds:
    """A tool's centroids: for routing, with its trusted exemplars alone (`trusted`) or with the
    untrusted ones too (`every`); for validating the untrusted ones, without the held-back
    trusted uses (`validation`) and with the untrusted ones besides (`validation_untrusted`)."""

    trusted: np.ndarray
    every: np.ndarray
    validation: np.ndarray
    validation_untrusted: np.ndarray


@dataclass
class _Toolset:
    version: int = 0
    tools: dict[str, ToolRecord] = field(default_factory=dict)
    # Per tool, its latest exemplars by (stamp, sequence): the agent's trusted uses, as (stamp,
    # sequence, embedding), and the free and teacher tiers' labels.
    trusted: dict[str, deque[tuple[int, int, np.ndarray]]] = field(default_factory=dict)
    untrusted: dict[str, deque[np.ndarray]] = field(default_factory=dict)
    # The held-back trusted uses among those, by (stamp, sequence): (tool, embedding).
    held_back: dict[tuple[int, int], tuple[str, np.ndarray]] = field(default_factory=dict)
    exemplar_counts: dict[str, int] = field(default_factory=dict)
    folds: dict[str, _Folds] = field(default_factory=dict)
    untrusted_route: bool = False
    bank: CentroidBank = field(default_factory=lambda: CentroidBank((), ()))


class ToolRegistry:
    """Registry calls (put, delete, list, route) and the learner's side (rank embeddings, add
    exemplars and refold). Changes to one tenant's registry are serialized."""

    def __init__(self, store: ToolStore, embedder: Embedder, config: ToolConfig):
        self._store = store
        self._embedder = embedder
        self._settings = config.settings
        self._limits = config.limits
        self._toolsets: dict[str, _Toolset] = {}
        self._versions: tuple[int, int] | None = None
        # The exemplars taken in, by event sequence (the store's rows may repeat one).
        self._seen: SeenStamps[int] = SeenStamps()
        self._lock = asyncio.Lock()
        self.refreshes = 0
        self.refresh_seconds = 0.0

    @classmethod
    async def restore(cls, store: ToolStore, embedder: Embedder, config: ToolConfig) -> ToolRegistry:
        registry = cls(store, embedder, config)
        registry._versions = await store.versions()
        registry._load_tools(await store.tools())
        max_exemplars = config.settings.max_exemplars_per_tool
        latest = await store.latest_exemplars(max_exemplars)
        for (name, tool, trusted), exemplars in latest.items():
            toolset = registry._toolsets.setdefault(name, _Toolset())
            if trusted:
                toolset.trusted[tool] = deque(exemplars, maxlen=max_exemplars)
                toolset.held_back.update(((t, q), (tool, v)) for t, q, v in exemplars if _held_back(q))
            else:
                toolset.untrusted[tool] = deque((v for *_, v in exemplars), maxlen=max_exemplars)
            registry._seen.add((sequence, stamp) for stamp, sequence, _ in exemplars)
        for (name, tool), count in (await store.exemplar_counts()).items():
            registry._toolsets.setdefault(name, _Toolset()).exemplar_counts[tool] = count
        recent = await store.exemplars_since(registry._seen.since_us)
        registry._seen.add((e.sequence, e.create_time_us) for e in recent)
        for toolset in registry._toolsets.values():
            registry._refold(toolset, toolset.tools)
        return registry

    def _load_tools(self, records: Iterable[ToolRecord]) -> list[_Toolset]:
        """Take in the store's tools: each toolset the store holds a later version of gets its
        tools from there; the toolsets that changed."""
        found: dict[str, tuple[int, dict[str, ToolRecord]]] = {}
        for record in records:
            version, tools = found.setdefault(record.toolset, (0, {}))
            found[record.toolset] = (max(version, record.version), tools)
            if not record.removed:
                tools[record.name] = record
        changed = []
        for name, (version, tools) in found.items():
            toolset = self._toolsets.setdefault(name, _Toolset())
            if version > toolset.version:
                toolset.version, toolset.tools = version, tools
                changed.append(toolset)
        return changed

    async def _reload_tools(self, versions: tuple[int, int] | None = None) -> None:
        """Take in the tools table if it moved since it was last read (`versions`: the store's
        versions, read now if not given)."""
        versions = versions or await self._store.versions()
        if self._versions is not None and versions[0] == self._versions[0]:
            return
        for toolset in self._load_tools(await self._store.tools()):
            self._refold(toolset, set(toolset.tools) | set(toolset.folds))
        self._versions = (versions[0], self._versions[1] if self._versions is not None else -1)

    async def catch_up(self) -> None:
        """Take in the tools and exemplars other processes wrote since the last look (README,
        "Scaling out"); nothing is read while neither table moved."""
        versions = await self._store.versions()
        if versions == self._versions:
            return
        async with self._lock:
            await self._reload_tools(versions)
            self._versions = versions
            self.add_exemplars(await self._store.exemplars_since(self._seen.since_us))

    def has(self, toolset: str) -> bool:
        found = self._toolsets.get(toolset)
        return found is not None and found.version > 0

    def _get(self, toolset: str) -> _Toolset:
        if not self.has(toolset):
            raise errors.NotFound(f"toolset {toolset!r} does not exist", field="toolset")
        return self._toolsets[toolset]

    def summary(self, toolset: str) -> tuple[int, int]:
        """(version, tool count); NotFound for an unknown toolset."""
        current = self._get(toolset)
        return current.version, len(current.tools)

    def exemplar_counts(self, toolset: str) -> dict[str, int]:
        return dict(self._get(toolset).exemplar_counts)

    def registered(self, toolset: str) -> Collection[str]:
        found = self._toolsets.get(toolset)
        return found.tools.keys() if found else ()

    def description(self, toolset: str, tool: str) -> str:
        return self._toolsets[toolset].tools[tool].description

    def _check(self, specs: Sequence[ToolSpec]) -> None:
        limits = self._limits
        if len(specs) > limits.max_tools_per_put:
            raise errors.InvalidArgument(f"at most {limits.max_tools_per_put} tools per call", field="tools")
        first: dict[str, int] = {}
        for i, spec in enumerate(specs):
            if spec.name in first:
                raise errors.InvalidArgument(
                    f"repeats tools[{first[spec.name]}].name {spec.name!r}", field=f"tools[{i}].name"
                )
            first[spec.name] = i
            if len(spec.description) > limits.max_description_chars:
                raise errors.InvalidArgument(
                    f"at most {limits.max_description_chars} characters", field=f"tools[{i}].description"
                )
            if len(spec.parameters_json) > limits.max_parameters_chars:
                raise errors.InvalidArgument(
                    f"at most {limits.max_parameters_chars} characters", field=f"tools[{i}].parameters_json"
                )
            if spec.parameters_json:
                try:
                    schema = json.loads(spec.parameters_json)
                except ValueError as error:
                    raise errors.InvalidArgument(
                        f"is not JSON: {error}", field=f"tools[{i}].parameters_json"
                    ) from None
                if not isinstance(schema, dict):
                    raise errors.InvalidArgument(
                        "is a JSON schema: an object", field=f"tools[{i}].parameters_json"
                    )

    async def put(self, toolset: str, specs: Sequence[ToolSpec]) -> tuple[int, int]:
        """Adds or replaces the tools (one new version); (version, tool count)."""
        self._check(specs)
        texts = [tool_text(s.name, s.description, s.parameters_json) for s in specs]
        vectors = await self._embedder.embed(texts)
        async with self._lock:
            await self._reload_tools()  # a version another process wrote is built on, not repeated
            current = self._toolsets.get(toolset) or _Toolset()
            if current.version == 0 and sum(self.has(t) for t in self._toolsets) >= self._limits.max_toolsets:
                raise errors.ResourceExhausted(
                    f"a tenant has at most {self._limits.max_toolsets} toolsets", field="toolset"
                )
            count = len(current.tools.keys() | {s.name for s in specs})
            if count > self._limits.max_tools:
                raise errors.ResourceExhausted(
                    f"a toolset has at most {self._limits.max_tools} tools; this would make {count}",
                    field="tools",
                )
            version = current.version + 1
            records = [
                ToolRecord(
                    toolset=toolset,
                    name=s.name,
                    description=s.description,
                    parameters_json=s.parameters_json,
                    version=version,
                    removed=False,
                    embedding=vectors[i],
                )
                for i, s in enumerate(specs)
            ]
            await self._store.put_tools(records)
            self._toolsets[toolset] = current
            current.version = version
            current.tools.update({r.name: r for r in records})
            self._refold(current, [r.name for r in records])
            return version, len(current.tools)

    async def delete(
        self, toolset: str, names: Sequence[str], forget_exemplars: bool = False
    ) -> tuple[int, int]:
        """Removes the tools (one new version), and what they learned if asked; (version, tool count)."""
        async with self._lock:
            await self._reload_tools()
            current = self._get(toolset)
            for i, name in enumerate(names):
                if name not in current.tools:
                    raise errors.NotFound(f"toolset {toolset!r} has no tool {name!r}", field=f"names[{i}]")
            version = current.version + 1
            records = [replace(current.tools[n], version=version, removed=True) for n in names]
            if forget_exemplars:
                await self._store.delete_exemplars(toolset, names)
            await self._store.put_tools(records)
            current.version = version
            for name in names:
                del current.tools[name]
                if forget_exemplars:
                    current.trusted.pop(name, None)
                    current.untrusted.pop(name, None)
                    current.exemplar_counts.pop(name, None)
            if forget_exemplars:
                current.held_back = {k: use for k, use in current.held_back.items() if use[0] not in names}
            self._refold(current, names)
            return version, len(current.tools)

    def list(self, toolset: str, page_size: int, page_token: str) -> tuple[list[ToolInfo], str, int]:
        """A page of the toolset's tools by name; (tools, next page token, version)."""
        if page_size > self._limits.max_page_size:
            raise errors.InvalidArgument(f"at most {self._limits.max_page_size}", field="page_size")
        current = self._get(toolset)
        names = sorted(n for n in current.tools if n > page_token)
        size = page_size or DEFAULT_PAGE_SIZE
        page = [
            ToolInfo(
                name=n,
                description=current.tools[n].description,
                parameters_json=current.tools[n].parameters_json,
                version=current.tools[n].version,
                exemplar_count=current.exemplar_counts.get(n, 0),
            )
            for n in names[:size]
        ]
        return page, (names[size - 1] if len(names) > size else ""), current.version

    async def route(
        self, toolset: str, request: str, top_k: int, offered: Sequence[str] = ()
    ) -> tuple[Route, int]:
        """The toolset's tools ranked for `request`; (route, toolset version)."""
        limits = self._limits
        if len(request) > limits.max_request_chars:
            raise errors.InvalidArgument(f"at most {limits.max_request_chars} characters", field="request")
        if top_k > limits.max_top_k:
            raise errors.InvalidArgument(f"at most {limits.max_top_k}", field="top_k")
        if len(offered) > limits.max_offered_tools:
            raise errors.InvalidArgument(f"at most {limits.max_offered_tools} tools", field="offered_tools")
        current = self._get(toolset)
        [vector] = await self._embedder.embed([request])
        return current.bank.rank(vector, top_k or DEFAULT_TOP_K, offered), current.version

    def rank(self, toolset: str, vector: np.ndarray, top_k: int, offered: Sequence[str] = ()) -> Route:
        """The learner's ranking of an embedded request (an unknown toolset ranks nothing)."""
        current = self._toolsets.get(toolset)
        return current.bank.rank(vector, top_k, offered) if current else CentroidBank((), ()).rank(vector, 1)

    def add_exemplars(self, exemplars: Iterable[ExemplarRecord]) -> None:
        """Take saved exemplars not taken in before into the tools' centroids: one refold per
        toolset touched."""
        touched: dict[str, set[str]] = {}
        # In (stamp, sequence) order, as a restart reads them: every process keeps the same latest.
        for e in sorted(exemplars, key=lambda e: (e.create_time_us, e.sequence)):
            if e.sequence in self._seen:
                continue
            self._seen.add([(e.sequence, e.create_time_us)])
            current = self._toolsets.setdefault(e.toolset, _Toolset())
            vector = np.asarray(e.embedding, np.float32)
            maxlen = self._settings.max_exemplars_per_tool
            if e.tier == LabelTier.TRUSTED:
                kept = current.trusted.setdefault(e.tool, deque(maxlen=maxlen))
                if len(kept) == maxlen:
                    current.held_back.pop(kept[0][:2], None)
                kept.append((e.create_time_us, e.sequence, vector))
                if _held_back(e.sequence):
                    current.held_back[(e.create_time_us, e.sequence)] = (e.tool, vector)
            else:
                current.untrusted.setdefault(e.tool, deque(maxlen=maxlen)).append(vector)
            current.exemplar_counts[e.tool] = current.exemplar_counts.get(e.tool, 0) + 1
            touched.setdefault(e.toolset, set()).add(e.tool)
        for name, tools in touched.items():
            self._refold(self._toolsets[name], tools)

    def untrusted_route(self, toolset: str) -> bool:
        """Whether the toolset's free and teacher exemplars route (validated on held-back trusted
        uses; `untrusted_labels_validate`)."""
        return self._get(toolset).untrusted_route

    def _refold(self, toolset: _Toolset, changed: Iterable[str]) -> None:
        """Fold the changed tools' centroids again (removed tools leave the bank), validate the
        untrusted exemplars and rebuild the bank's matrix from the centroids they allow."""
        started = time.perf_counter()
        weight = self._settings.description_weight
        for name in changed:
            record = toolset.tools.get(name)
            if record is None:
                toolset.folds.pop(name, None)
                continue
            description = record.embedding
            trusted = [v for *_, v in toolset.trusted.get(name, ())]
            folded = [v for _, q, v in toolset.trusted.get(name, ()) if not _held_back(q)]
            untrusted = list(toolset.untrusted.get(name, ()))

            def folding(exemplars: list[np.ndarray], description: np.ndarray = description) -> np.ndarray:
                return fold(description, _rows(exemplars, description), weight).astype(np.float32)

            toolset.folds[name] = _Folds(
                trusted=folding(trusted),
                every=folding(trusted + untrusted),
                validation=folding(folded),
                validation_untrusted=folding(folded + untrusted),
            )
        names = sorted(toolset.folds)

        def bank(kind: str) -> CentroidBank:
            return CentroidBank(
                names, np.stack([getattr(toolset.folds[n], kind) for n in names]) if names else ()
            )

        minimum = self._settings.untrusted_validation_uses
        uses = [(key, use) for key, use in toolset.held_back.items() if use[0] in toolset.folds]
        toolset.untrusted_route = False
        if len(uses) >= minimum and any(toolset.untrusted.get(n) for n in names):
            held_back = [use for _, use in heapq.nlargest(HELD_BACK_USES, uses, key=lambda u: u[0])]
            toolset.untrusted_route = untrusted_labels_validate(
                bank("validation"), bank("validation_untrusted"), held_back, minimum
            )
        toolset.bank = bank("every" if toolset.untrusted_route else "trusted")
        self.refreshes += 1
        self.refresh_seconds += time.perf_counter() - started


def _rows(vectors: Sequence[np.ndarray], description: np.ndarray) -> np.ndarray:
    """Exemplar embeddings as the rows `fold` takes (none: a 0-row array of the description's width)."""
    return np.stack(vectors) if vectors else np.empty((0, len(description)))
