"""A tenant's tool service: its registry (PutTools, DeleteTools, ListTools, RouteTool), the
learner fed by Observe's tool-use events, and their metrics (README, "Tool selection")."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sounding.core.tool_routing import Route
from sounding.runtime.following import follow
from sounding.store.tools import ToolStore
from sounding.tools.learner import ToolLearner
from sounding.tools.protocol import (
    Embedder,
    RejectedUse,
    Teacher,
    ToolConfig,
    ToolInfo,
    ToolMetrics,
    ToolSpec,
    ToolUse,
)
from sounding.tools.registry import ToolRegistry


class ToolService:
    def __init__(self, registry: ToolRegistry, learner: ToolLearner):
        self._registry = registry
        self._learner = learner
        self._following: asyncio.Task | None = None

    @classmethod
    async def open(
        cls,
        store: ToolStore,
        embedder: Embedder,
        teacher: Teacher | None,
        config: ToolConfig,
    ) -> ToolService:
        """The registry restored from the store, and the learner started (resuming after the
        last event it processed)."""
        registry = await ToolRegistry.restore(store, embedder, config)
        learner = ToolLearner(store, registry, embedder, teacher, config)
        await learner.start()
        return cls(registry, learner)

    def follow_store(self, interval_s: float) -> None:
        """Take in the tools and exemplars other orchestrators write, every `interval_s` from
        now until `close`."""
        self._following = asyncio.get_running_loop().create_task(
            follow(self._registry.catch_up, interval_s, "the tool tables")
        )

    async def put(self, toolset: str, tools: Sequence[ToolSpec]) -> tuple[int, int]:
        return await self._registry.put(toolset, tools)

    async def delete(
        self, toolset: str, names: Sequence[str], forget_exemplars: bool = False
    ) -> tuple[int, int]:
        return await self._registry.delete(toolset, names, forget_exemplars)

    def list(self, toolset: str, page_size: int, page_token: str) -> tuple[list[ToolInfo], str, int]:
        return self._registry.list(toolset, page_size, page_token)

    async def route(
        self, toolset: str, request: str, top_k: int, offered: Sequence[str]
    ) -> tuple[Route, int]:
        return await self._registry.route(toolset, request, top_k, offered)

    async def observe(self, uses: Sequence[tuple[int, ToolUse]]) -> tuple[int, list[RejectedUse]]:
        return await self._learner.observe(uses)

    async def metrics(self, toolset: str, window: int) -> ToolMetrics:
        return await self._learner.metrics(toolset, window)

    async def close(self) -> None:
        if self._following is not None:
            self._following.cancel()
        await self._learner.close()
