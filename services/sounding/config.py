"""Configuration, read from `SOUNDING_*` environment variables (nested with `__`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from sounding.core.expansion import DEFAULT_STRATEGIES, Strategy


class EmbedderSettings(BaseModel):
    """Dynamic micro-batching of Embed across concurrent callers."""

    max_batch_size: int = Field(64, ge=1, le=4096)
    # How long the first request of a batch waits for company before the batch runs. With 0 a
    # lone request runs at once, and requests arriving while a batch encodes still form the next.
    max_wait_ms: float = Field(0.0, ge=0.0, le=1000.0)
    # Batches of at most this many texts encode on one CPU thread (see models.embedder.Embedder).
    single_thread_max_texts: int = Field(4, ge=0, le=4096)


class GeneratorSettings(BaseModel):
    """Which generator `Generate` uses: the bundled SmolLM2 or an OpenAI-compatible endpoint."""

    backend: Literal["local", "openai"] = "local"
    # The local backend batches concurrent generations that decode alike.
    max_batch_size: int = Field(8, ge=1, le=256)
    max_wait_ms: float = Field(5.0, ge=0.0, le=1000.0)
    # Load the local model when the sidecar starts rather than on the first Generate.
    preload: bool = False
    # Greedy generations kept in `<data dir>/cache/generations.sqlite` (0: no cache). A repeated
    # deterministic request is then answered from the cache instead of decoded again.
    cache_max_entries: int = Field(0, ge=0)
    openai_base_url: str = "http://127.0.0.1:8000/v1"
    openai_api_key: str = ""
    openai_model: str = "default"
    request_timeout_s: float = 120.0


class NliSettings(BaseModel):
    """The NLI model behind `Entail` and entailment clustering."""

    # A Hugging Face sequence-classification NLI model (a directory, or a hub id already in the
    # local cache). Empty: Sounding's own, `<cache_dir>/nli-minilm-snli`, trained on first use.
    model: str = ""
    # Training budget of Sounding's own model; a cached copy trained with less is trained again.
    train_max_minutes: float = Field(20.0, gt=0.0)
    max_batch_size: int = Field(64, ge=1, le=4096)
    max_wait_ms: float = Field(0.0, ge=0.0, le=1000.0)


class ModelsSettings(BaseModel):
    address: str = "127.0.0.1:50052"
    # Converted model copies (e.g. the de-quantised SmolLM2), shared by every data directory.
    cache_dir: Path = Path.home() / ".cache" / "sounding" / "models"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    torch_threads: int = Field(0, ge=0, description="0 keeps torch's default")
    embedder: EmbedderSettings = EmbedderSettings()
    generator: GeneratorSettings = GeneratorSettings()
    nli: NliSettings = NliSettings()


class SelectionSettings(BaseModel):
    """How Retrieve chooses its arms when the request names none (adaptive-strategy spec §5–§6)."""

    # The arms the selector chooses among (a request may still name any registered arm).
    arms: list[str] = ["dense", "lexical", "hyde", "query2doc", "multi_query", "grounded"]
    # LinUCB's exploration parameter α.
    alpha: float = Field(1.0, ge=0.0)
    # Arms whose upper score is at least this share of the best arm's run.
    relative_threshold: float = Field(0.9, ge=0.0, le=1.0)
    # The first this many planned queries run every arm.
    cold_start_queries: int = Field(100, ge=0)
    # Every this many planned queries run every arm (0: never).
    force_all_every: int = Field(100, ge=0)
    exploration_rate: float = Field(0.3, ge=0.0, le=1.0)
    min_exploration_rate: float = Field(0.05, ge=0.0, le=1.0)
    exploration_decay: float = Field(0.99, gt=0.0, le=1.0)
    seed: int = 0
    # Calibrate(BANDIT) retrains on the observations of this many most recent days.
    recalibration_window_days: float = Field(30.0, gt=0.0)


class ExpansionSettings(BaseModel):
    """The expansion loop's defaults (retrieval-uncertainty spec, "Iterative Retrieval Loop");
    a request may override each."""

    min_recall: float = Field(0.7, ge=0.0, le=1.0)
    # 0 turns the loop off.
    max_iterations: int = Field(3, ge=0, le=10)
    # Expanded queries over all iterations.
    budget: int = Field(5, ge=1, le=50)
    strategies: list[Strategy] = list(DEFAULT_STRATEGIES)
    # At most this many expanded queries per iteration.
    queries_per_step: int = Field(2, ge=1, le=10)
    # An expanded query's ranking weighs this share of the arms' mean fusion weight.
    fusion_weight: float = Field(0.5, gt=0.0, le=1.0)
    # The loop never reorders this many first positions of the result.
    protected_head: int = Field(10, ge=0, le=1000)


class RetrievalSettings(BaseModel):
    strategy_workers: int = Field(2, ge=1, le=64)
    fusion_k: float = Field(60.0, gt=0)
    # Above this many chunks the dense arm uses LanceDB's vector search instead of an exact
    # in-memory scan of the table's vectors.
    exact_scan_max_chunks: int = Field(500_000, ge=0)
    selection: SelectionSettings = SelectionSettings()
    expansion: ExpansionSettings = ExpansionSettings()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SOUNDING_", env_nested_delimiter="__")

    data_dir: Path = Path(".sounding")
    address: str = "127.0.0.1:50051"
    # Address of a Ray cluster to join; empty starts a local Ray runtime.
    ray_address: str = ""
    models: ModelsSettings = ModelsSettings()
    retrieval: RetrievalSettings = RetrievalSettings()

    @property
    def store_uri(self) -> str:
        return str(self.data_dir / "lancedb")

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"
