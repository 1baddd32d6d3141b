"""StrategyRunner: the warm handles an arm needs (sidecar channel, read-only store) and the calls
that run one arm or one expansion step under the caller's trace. Both executors use it; on Ray
each worker owns one."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import threadpoolctl

from sounding.models.client import ModelsClient
from sounding.retrieval.expansions import expand
from sounding.retrieval.protocol import ArmRequest, ArmResult, ExpansionRequest, ExpansionResult
from sounding.retrieval.strategies import STRATEGIES
from sounding.runtime import telemetry
from sounding.settings.config import ModelsSettings
from sounding.store.connection import configure_caches
from sounding.store.location import StoreLocation
from sounding.store.reader import ChunkReader
from sounding.store.tenancy import ResourceRef


@dataclass(frozen=True)
class RunnerConfig:
    """What a StrategyRunner opens: the sidecar it calls, the store it reads (dense arms scan up
    to `exact_scan_max_chunks` chunks in memory), the bounds of its reader's memory and the sizes
    of LanceDB's caches in its process."""

    models: ModelsSettings
    store: StoreLocation
    exact_scan_max_chunks: int
    snapshot_bytes: int
    max_graphs: int
    lancedb_index_cache_mib: int
    lancedb_metadata_cache_mib: int


class StrategyRunner:
    def __init__(self, models: ModelsClient, reader: ChunkReader):
        self._models = models
        self._reader = reader

    @classmethod
    async def open(cls, config: RunnerConfig) -> StrategyRunner:
        # Dense scans are small matrix-vector products: threaded BLAS gains nothing on them, and
        # its threads keep spinning afterwards on the cores the sidecar's encoder needs (measured
        # here: a query encode took 43 ms instead of 17 ms right after a two-thread scan).
        threadpoolctl.threadpool_limits(1, user_api="blas")
        configure_caches(config.lancedb_index_cache_mib, config.lancedb_metadata_cache_mib)
        reader = await ChunkReader.open(
            config.store, config.exact_scan_max_chunks, config.snapshot_bytes, config.max_graphs
        )
        return cls(ModelsClient.of(config.models), reader)

    async def close(self) -> None:
        await self._models.close()

    def forget(self, collection: ResourceRef) -> None:
        self._reader.forget(collection)

    async def run(self, arm: str, request: ArmRequest, trace_carrier: Mapping[str, str]) -> ArmResult:
        strategy = STRATEGIES[arm]
        with telemetry.tracer().start_as_current_span(
            f"arm.{arm}",
            context=telemetry.extract(trace_carrier),
            attributes={
                "sounding.arm": arm,
                "sounding.collection": request.collection.key,
                "sounding.limit": request.limit,
            },
        ):
            started = time.perf_counter()
            found = await strategy.search(request, self._models, self._reader)
            latency_ms = (time.perf_counter() - started) * 1000
            return ArmResult(arm, found.hits, latency_ms, found.generated_text, found.cached_decode_ms)

    async def expand(self, request: ExpansionRequest, trace_carrier: Mapping[str, str]) -> ExpansionResult:
        with telemetry.tracer().start_as_current_span(
            f"expansion.{request.strategy}",
            context=telemetry.extract(trace_carrier),
            attributes={
                "sounding.expansion.strategy": request.strategy,
                "sounding.collection": request.collection.key,
            },
        ):
            started = time.perf_counter()
            queries, hits = await expand(request, self._models, self._reader)
            latency_ms = (time.perf_counter() - started) * 1000
            return ExpansionResult(request.strategy, queries, hits, latency_ms)
