"""The teacher of the two-tier oracle: the sidecar's generator prompted as a router over the
ranker's best candidates (greedy, a few tokens, its answer parsed strictly). The generator is the
bundled model or the OpenAI-compatible endpoint the sidecar is configured with."""

from __future__ import annotations

from collections.abc import Sequence

from sounding.core.tool_routing import parse_teacher, teacher_messages
from sounding.models.client import ModelsClient


class GeneratorTeacher:
    def __init__(self, models: ModelsClient, tenant: str, max_new_tokens: int = 32, timeout_s: float = 60.0):
        self._models = models
        self._tenant = tenant
        self._max_new_tokens = max_new_tokens
        self._timeout_s = timeout_s

    async def label(self, request: str, candidates: Sequence[tuple[str, str]]) -> str | None:
        pieces = self._models.generate(
            teacher_messages(request, candidates),
            max_new_tokens=self._max_new_tokens,
            temperature=0.0,
            timeout=self._timeout_s,
            flow="tools:teacher",
            cache_scope=self._tenant,
        )
        text = "".join([piece.text async for piece in pieces])
        return parse_teacher(text, {name for name, _ in candidates})
