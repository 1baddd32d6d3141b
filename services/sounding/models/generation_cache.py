"""A persistent cache of deterministic generations, in front of any `Generator`.

Only greedy requests (temperature 0, no seed) are cached: for them the same messages and limits
give the same text, so a repeated query costs a lookup instead of a decode. Entries live in one
SQLite file; the oldest are evicted beyond `max_entries`. A generation is stored only when it ran
to its end (a cancelled caller stores nothing), and a hit streams the stored text as one piece.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from sounding.models.generators import GenerationParams, Generator, Piece

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    finish_reason TEXT NOT NULL,
    stored INTEGER NOT NULL
)
"""


class CachedGenerator:
    """Wraps `inner`; `identity` names the model behind it (so two backends never share entries)."""

    def __init__(self, inner: Generator, identity: str, path: Path, max_entries: int):
        self.model_name = inner.model_name
        self._inner = inner
        self._identity = identity
        self._max_entries = max_entries
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)
        self._sequence = self._db.execute("SELECT COALESCE(MAX(stored), 0) FROM generations").fetchone()[0]

    def key(self, messages: Sequence[dict[str, str]], params: GenerationParams) -> str | None:
        """The cache key, or None when the request is not deterministic."""
        if params.temperature != 0 or params.seed is not None:
            return None
        payload = json.dumps(
            [self._identity, list(messages), params.max_new_tokens, list(params.stop)], sort_keys=True
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    def lookup(self, key: str) -> Piece | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, finish_reason FROM generations WHERE key = ?", (key,)
            ).fetchone()
        return Piece(row[0], row[1]) if row else None

    def store(self, key: str, text: str, finish_reason: str) -> None:
        with self._lock:
            self._sequence += 1
            self._db.execute(
                "INSERT OR REPLACE INTO generations VALUES (?, ?, ?, ?)",
                (key, text, finish_reason, self._sequence),
            )
            self._db.execute(
                "DELETE FROM generations WHERE stored <= ?", (self._sequence - self._max_entries,)
            )

    async def stream(
        self, messages: Sequence[dict[str, str]], params: GenerationParams
    ) -> AsyncIterator[Piece]:
        key = self.key(messages, params)
        cached = self.lookup(key) if key else None
        if cached is not None:
            yield cached
            return
        pieces: list[str] = []
        async for piece in self._inner.stream(messages, params):
            pieces.append(piece.text)
            if piece.finish_reason and key:
                self.store(key, "".join(pieces), piece.finish_reason)
            yield piece
