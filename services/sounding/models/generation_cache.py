"""A persistent cache of deterministic generations, in front of any `Generator`.

Only greedy requests (temperature 0, no seed) are cached: for them the same messages and limits
give the same text, so a repeated query costs a lookup instead of a decode. An entry serves only
requests of the scope it was generated for (`GenerationParams.cache_scope`, the tenant). Entries live in one
SQLite file; the oldest are evicted beyond `max_entries`. A generation is stored only when it ran
to its end (a cancelled caller stores nothing), with the time decoding it took; a hit streams the
stored text as one piece carrying that time, so callers can still count what the text costs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from sounding.models.generators import GenerationParams, Generator, Piece

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    finish_reason TEXT NOT NULL,
    stored INTEGER NOT NULL,
    decode_ms REAL
)
"""
# Eviction deletes by `stored`: without an index every store scanned the table.
_INDEX = "CREATE INDEX IF NOT EXISTS generations_stored ON generations (stored)"


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
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(generations)")}
        if "decode_ms" not in columns:  # a cache written before decode times were kept
            self._db.execute("ALTER TABLE generations ADD COLUMN decode_ms REAL")
        self._db.execute(_INDEX)
        self._sequence = self._db.execute("SELECT COALESCE(MAX(stored), 0) FROM generations").fetchone()[0]

    def key(self, messages: Sequence[dict[str, str]], params: GenerationParams) -> str | None:
        """The cache key, or None when the request is not deterministic."""
        if params.temperature != 0 or params.seed is not None:
            return None
        payload = json.dumps(
            [self._identity, params.cache_scope, list(messages), params.max_new_tokens, list(params.stop)],
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    def lookup(self, key: str) -> Piece | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, finish_reason, decode_ms FROM generations WHERE key = ?", (key,)
            ).fetchone()
        return Piece(row[0], row[1], row[2] or 0.0) if row else None

    def store(self, key: str, text: str, finish_reason: str, decode_ms: float) -> None:
        with self._lock:
            self._sequence += 1
            self._db.execute(
                "INSERT OR REPLACE INTO generations (key, text, finish_reason, stored, decode_ms) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, text, finish_reason, self._sequence, decode_ms),
            )
            self._db.execute(
                "DELETE FROM generations WHERE stored <= ?", (self._sequence - self._max_entries,)
            )

    async def stream(
        self, messages: Sequence[dict[str, str]], params: GenerationParams, flow: str = ""
    ) -> AsyncIterator[Piece]:
        key = self.key(messages, params)
        cached = await asyncio.to_thread(self.lookup, key) if key else None
        if cached is not None:
            yield cached
            return
        pieces: list[str] = []
        started = time.perf_counter()
        async for piece in self._inner.stream(messages, params, flow):
            pieces.append(piece.text)
            if piece.finish_reason and key:
                decode_ms = (time.perf_counter() - started) * 1000
                await asyncio.to_thread(self.store, key, "".join(pieces), piece.finish_reason, decode_ms)
            yield piece
