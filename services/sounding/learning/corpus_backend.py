"""CorpusTools: the corpus inquiry domain's backend (`inquiry.protocol.CorpusBackend`) for one
session of a tenant, over the services that already exist: queries run through the retrieval
pipeline (the requested arms, fused; no expansion loop), sentences are judged by the sidecar's
NLI model, the graph gives entity neighbours, and the tenant's corpus inquiry learner predicts
and learns. The domain names the collection as the client did: every method makes the tenant's
`ResourceRef` of it before anything reads (its collections are the tenant's public names: the
learner is the tenant's own)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from sounding.inquiry.protocol import OutcomeModels, SearchHit
from sounding.learning.tenants import TenantLearning
from sounding.models.client import ModelsClient
from sounding.retrieval.protocol import ExpansionOptions, FinalEvent, RetrieveQuery
from sounding.retrieval.service import RetrievalService
from sounding.retrieval.strategies import STRATEGIES
from sounding.runtime import errors
from sounding.store.collections import Store
from sounding.store.corpus_inquiry import ExecutedQuery
from sounding.store.graph import GraphStore
from sounding.store.tenancy import ResourceRef

COLLECTION_FIELD = "start.domain_parameters.collection"


class CorpusTools:
    def __init__(
        self,
        *,
        tenant: str,
        session_id: str,
        retrieval: RetrievalService,
        learning: Callable[[], Awaitable[TenantLearning]],
        models: ModelsClient,
        store: Store,
        graphs: GraphStore,
        search_timeout_s: float,
        models_timeout_s: float,
        generate_timeout_s: float,
    ):
        self._tenant = tenant
        self._session_id = session_id
        self._retrieval = retrieval
        self._learning = learning
        self._models = models
        self._store = store
        self._graphs = graphs
        # A query's retrieval runs under the Retrieve deadline; the sidecar's calls under its own
        # (the first Entail of a fresh sidecar trains the NLI model).
        self._search_timeout_s = search_timeout_s
        self._models_timeout_s = models_timeout_s
        self._generate_timeout_s = generate_timeout_s

    def _ref(self, collection: str) -> ResourceRef:
        return ResourceRef.named(self._tenant, collection, COLLECTION_FIELD)

    async def check(self, collection: str, arms: Sequence[str]) -> None:
        unknown = sorted(set(arms) - set(STRATEGIES))
        if unknown:
            raise errors.InvalidArgument(
                f"unknown arms {unknown}; known: {sorted(STRATEGIES)}", field="start.domain_parameters.arms"
            )
        try:
            await self._store.get_collection(self._ref(collection))
        except errors.NotFound:
            raise errors.NotFound(
                f"collection {collection!r} does not exist",
                reason="COLLECTION_NOT_FOUND",
                field=COLLECTION_FIELD,
            ) from None

    async def search(self, collection: str, query: str, top_k: int, arms: Sequence[str]) -> list[SearchHit]:
        request = RetrieveQuery(
            collection=self._ref(collection),
            query=query,
            top_k=top_k,
            arms=tuple(arms),
            expansion=ExpansionOptions(max_iterations=0),
            timeout_s=self._search_timeout_s,
        )
        learning = (await self._learning()).retrieval
        async for event in self._retrieval.retrieve(request, learning):
            if isinstance(event, FinalEvent):
                return [SearchHit(h.document_id, h.chunk_id, h.score, h.title, h.text) for h in event.hits]
        raise errors.SoundingError("the retrieval ended without a result")

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await self._models.embed(texts, timeout=self._models_timeout_s)

    async def entail(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return await self._models.entail(pairs, timeout=self._models_timeout_s)

    async def generate(self, messages: Sequence[dict[str, str]], max_tokens: int) -> str:
        pieces = self._models.generate(
            messages,
            max_new_tokens=max_tokens,
            timeout=self._generate_timeout_s,
            flow=f"inquiry:{self._session_id}",
            cache_scope=self._tenant,
        )
        return "".join([piece.text async for piece in pieces])

    async def related(self, collection: str, entities: Sequence[str], limit: int) -> dict[str, list[str]]:
        return await self._graphs.related(self._ref(collection), list(entities), limit)

    async def chunk_vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        found = await self._store.chunk_vectors(self._ref(collection), list(chunk_ids))
        return {c: v / max(float(np.linalg.norm(v)), 1e-12) for c, v in found.items()}

    async def outcome_models(self, collection: str) -> OutcomeModels:
        return (await self._learning()).corpus_inquiry.models(collection)

    async def record_query(self, query: ExecutedQuery) -> None:
        await (await self._learning()).corpus_inquiry.record(query)
