"""A scripted stand-in for the models: answers chosen by a callable, embeddings by hashing."""

from __future__ import annotations

import hashlib

import numpy as np
from sounding.core.clustering import exact_clusters


class FakeBackend:
    def __init__(self, reply):
        self.reply = reply
        self.calls: list[list[dict]] = []

    async def text(self, messages, temperature, top_p, max_tokens) -> str:
        self.calls.append(list(messages))
        return self.reply(messages, len(self.calls))

    async def embed(self, texts):
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
            row = np.random.default_rng(seed).normal(size=16)
            rows.append(row / np.linalg.norm(row))
        return np.asarray(rows, dtype=np.float32)

    async def cluster(self, texts, method):
        return exact_clusters(texts)
