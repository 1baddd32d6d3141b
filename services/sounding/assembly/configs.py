"""The orchestrator's services' settings objects, built from `Settings`: every service takes its
collaborators and one frozen config describing what it needs, and this module reads the settings
for it (the sidecar's servicer's is built in `assembly.sidecar`)."""

from __future__ import annotations

from sounding.core.bandit import ExplorationSchedule
from sounding.core.expansion_gate import ExpansionGateConfig
from sounding.corpus.graph import GraphConfig
from sounding.gateway.servicers import SoundingServicerConfig
from sounding.learning.selection import SelectionConfig
from sounding.learning.service import LearningConfig
from sounding.retrieval.executors import RayExecutorConfig
from sounding.retrieval.runner import RunnerConfig
from sounding.retrieval.service import RetrievalConfig
from sounding.retrieval.strategies import STRATEGIES
from sounding.settings.config import Settings
from sounding.tools.protocol import ToolConfig


def runner_config(settings: Settings) -> RunnerConfig:
    """A strategy runner's (in the orchestrator, or in each strategy worker)."""
    memory = settings.limits.memory
    return RunnerConfig(
        models=settings.models,
        store=settings.store_location,
        exact_scan_max_chunks=settings.retrieval.exact_scan_max_chunks,
        snapshot_bytes=memory.worker_snapshot_mib * 1024 * 1024,
        max_graphs=memory.worker_graphs,
        lancedb_index_cache_mib=memory.worker_lancedb_index_cache_mib,
        lancedb_metadata_cache_mib=memory.lancedb_metadata_cache_mib,
    )


def ray_executor_config(settings: Settings) -> RayExecutorConfig:
    """The strategy workers'. A local Ray runtime's workers listen on loopback only; in a
    cluster, on their node."""
    return RayExecutorConfig(
        workers=settings.retrieval.strategy_workers,
        resources=settings.retrieval.worker_resources,
        host=None if settings.ray_address else "127.0.0.1",
        runner=runner_config(settings),
    )


def retrieval_config(settings: Settings) -> RetrievalConfig:
    return RetrievalConfig(
        expansion=settings.retrieval.expansion,
        fusion=settings.retrieval.fusion,
        fusion_k=settings.retrieval.fusion_k,
        limits=settings.limits.retrieve,
    )


def learning_config(settings: Settings) -> LearningConfig:
    """Each tenant's learning service's; the arms the selector may choose
    (`retrieval.selection.arms`) must be known, or ValueError."""
    selection = settings.retrieval.selection
    unknown = sorted(set(selection.arms) - set(STRATEGIES))
    if unknown or not selection.arms:
        raise ValueError(
            f"retrieval.selection.arms must name known arms ({sorted(STRATEGIES)}), got {unknown}"
        )
    return LearningConfig(
        arms=tuple(selection.arms),
        selection=SelectionConfig(
            alpha=selection.alpha,
            schedule=ExplorationSchedule(
                cold_start_queries=selection.cold_start_queries,
                force_all_every=selection.force_all_every,
                initial_rate=selection.exploration_rate,
                min_rate=selection.min_exploration_rate,
                decay=selection.exploration_decay,
            ),
            seed=selection.seed,
            history_capacity=settings.limits.memory.learning_history,
            costly_ratio=selection.costly_ratio,
            costly_share=selection.costly_share,
        ),
        recalibration_window_s=selection.recalibration_window_days * 24 * 3600,
        assumed_costly=tuple(arm for arm in selection.arms if STRATEGIES[arm].generates),
        expansion_gate=ExpansionGateConfig(
            used_document_worth_ms=settings.retrieval.expansion.used_document_worth_ms
        ),
        follow_interval_s=settings.store.follow_interval_s,
    )


def tool_config(settings: Settings) -> ToolConfig:
    """Each tenant's tool service's."""
    return ToolConfig(settings=settings.tools, limits=settings.limits.tools)


def graph_config(settings: Settings) -> GraphConfig:
    return GraphConfig(max_entities_per_chunk=settings.limits.corpus.graph_max_entities_per_chunk)


def sounding_servicer_config(settings: Settings) -> SoundingServicerConfig:
    limits = settings.limits
    return SoundingServicerConfig(
        max_inquiry_start_bytes=limits.inquiry.max_start_bytes,
        observe=limits.observe,
        max_calibrate_inline_states=limits.calibrate.max_inline_states,
    )
