"""Configuration, read from `SOUNDING_*` environment variables (nested with `__`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sounding.core.expansion import DEFAULT_STRATEGIES, Strategy
from sounding.settings.limits import LimitsSettings
from sounding.settings.tokens import TokenEntry
from sounding.store.location import StoreLocation


class TlsSettings(BaseModel):
    """TLS of one hop (README, "Security"). Server side: `cert_file` and `key_file` make the port
    speak TLS, and `client_ca_file` requires clients to present a certificate it signed (mutual
    TLS). Client side: `ca_file` verifies the server (TLS on when set), and `client_cert_file`
    with `client_key_file` answer a server that requires mutual TLS. PEM files."""

    cert_file: Path | None = None
    key_file: Path | None = None
    client_ca_file: Path | None = None
    ca_file: Path | None = None
    client_cert_file: Path | None = None
    client_key_file: Path | None = None

    @model_validator(mode="after")
    def _client_certificate_complete(self) -> TlsSettings:
        if (self.client_cert_file is None) != (self.client_key_file is None):
            raise ValueError("a client certificate needs both client_cert_file and client_key_file")
        if self.client_cert_file is not None and self.ca_file is None:
            raise ValueError("a client certificate needs ca_file (TLS) as well")
        return self


class StoreSettings(BaseModel):
    """Where the LanceDB store lives (README, "Deploy on Kubernetes"). Empty `uri`: the directory
    `<data_dir>/lancedb`. `s3://bucket/prefix`: S3 or an S3-compatible object store at `endpoint`
    (e.g. MinIO; `allow_http` for a plain-HTTP one), in `region`; without keys, the AWS default
    chain (environment, web identity, instance profile) supplies the credentials."""

    uri: str = Field(default="", pattern=r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?)?$")
    endpoint: str = ""
    region: str = ""
    allow_http: bool = False
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    # How long a lease of the store (schema changes, collection changes, compaction) outlives its
    # holder's last renewal: a process that dies holding one delays the others by at most this.
    lease_ttl_s: float = Field(default=10.0, ge=2.0, le=300.0)
    # How often an orchestrator reads what the others on the store learned (observations,
    # deployments, calibrations) into its own state.
    follow_interval_s: float = Field(default=0.5, gt=0.0, le=60.0)

    def storage_options(self) -> dict[str, str]:
        """LanceDB's `storage_options` for an object store."""
        options = {
            "aws_endpoint": self.endpoint,
            "aws_region": self.region,
            "allow_http": "true" if self.allow_http else "",
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "aws_session_token": self.session_token,
        }
        return {
            key: value.get_secret_value() if isinstance(value, SecretStr) else value
            for key, value in options.items()
            if value
        }


class AuthSettings(BaseModel):
    """Bearer tokens of the public port (README, "Security"; `sounding.serving.auth`)."""

    # A TOML file of [[tokens]] tables (sha256, tenant, role), read again when it changes.
    tokens_file: Path | None = None
    # More tokens, as JSON: [{"sha256": "...", "tenant": "...", "role": "..."}].
    tokens: list[TokenEntry] = []
    # Serve a non-loopback address without tokens (refused otherwise).
    allow_unauthenticated: bool = False
    # When the token file disappears or stops parsing, keep its last good tokens in force (by
    # default they are refused until it reads again: revocation fails closed).
    keep_last_good_tokens: bool = False


class EmbedderSettings(BaseModel):
    """The embedding model behind `Embed`, and dynamic micro-batching across concurrent callers."""

    # A sentence-transformers model (a directory, or a hub id in the local cache); empty: the bundled
    # all-MiniLM-L6-v2. Collections keep the model they were made with.
    model: str = ""
    # What runs it: ONNX Runtime (the model exported once into `ModelsSettings.cache_dir`; a
    # transformer, mean pooling, normalisation model only) or torch. `auto`: ONNX Runtime on CPU
    # where the model allows it, else torch. Both give the same vectors to float precision.
    backend: Literal["auto", "onnx", "torch"] = "auto"
    max_batch_size: int = Field(default=64, ge=1, le=4096)
    # How long the first request of a batch waits for company before the batch runs. With 0 a
    # lone request runs at once, and requests arriving while a batch encodes still form the next.
    max_wait_ms: float = Field(default=0.0, ge=0.0, le=1000.0)
    # Texts per forward pass within a batch: a pass's memory grows with texts x length^2, so
    # long texts in large passes make the sidecar's resident memory spike.
    forward_batch_size: int = Field(default=8, ge=1, le=4096)
    # Batches of at most this many texts encode on one CPU thread (see models.embedder.TorchEmbedder).
    single_thread_max_texts: int = Field(default=4, ge=0, le=4096)


class GeneratorSettings(BaseModel):
    """Which generator `Generate` uses: the bundled SmolLM2 or an OpenAI-compatible endpoint."""

    backend: Literal["local", "openai"] = "local"
    # The local backend batches concurrent generations that decode alike.
    max_batch_size: int = Field(default=8, ge=1, le=256)
    max_wait_ms: float = Field(default=5.0, ge=0.0, le=1000.0)
    # The most tokens, padding included, that a batch's prefill encodes beyond the prefix its
    # prompts share (the first forward pass's memory grows with them); rows repeating a prompt
    # add none. A longer prompt runs in a batch of its own.
    max_batch_prompt_tokens: int = Field(default=1024, ge=1)
    # A batch's rows x (its longest prompt + its most new tokens), at most this many: the
    # key-value cache it decodes with grows to that (rows sharing a prefill each hold a copy).
    # A longer generation runs alone.
    max_batch_cache_tokens: int = Field(default=20480, ge=1)
    # Load the model while the sidecar starts (it reports NOT_SERVING meanwhile), so the first
    # Retrieve with a generating arm does not spend its arm timeout on loading it.
    preload: bool = True
    # Greedy generations kept in `<data dir>/cache/generations.sqlite` (0: no cache). A repeated
    # deterministic request is then answered from the cache instead of decoded again.
    cache_max_entries: int = Field(default=0, ge=0)
    openai_base_url: str = "http://127.0.0.1:8000/v1"
    # The endpoint's key: from the environment, or read from a file (a mounted secret). A
    # SecretStr: settings printed or logged show it as asterisks.
    openai_api_key: SecretStr = SecretStr("")
    openai_api_key_file: Path | None = None
    openai_model: str = "default"
    request_timeout_s: float = 120.0

    def api_key(self) -> str:
        """The endpoint's key ('' for none); the file wins over the environment."""
        if self.openai_api_key_file is not None:
            return self.openai_api_key_file.read_text().strip()
        return self.openai_api_key.get_secret_value()


class NliSettings(BaseModel):
    """The NLI model behind `Entail` and entailment clustering."""

    # A Hugging Face sequence-classification NLI model (a directory, or a hub id already in the
    # local cache). Empty: Sounding's own, `<cache_dir>/nli-minilm-snli`, trained on first use.
    model: str = ""
    # Optimisation steps of Sounding's own model (924: three epochs of the bundled pairs in batches
    # of 32); a cached copy trained for fewer is trained again.
    train_steps: int = Field(default=924, ge=1, le=1_000_000)
    max_batch_size: int = Field(default=64, ge=1, le=4096)
    max_wait_ms: float = Field(default=0.0, ge=0.0, le=1000.0)
    forward_batch_size: int = Field(default=8, ge=1, le=4096)  # pairs per forward pass, as the embedder's


class ModelsSettings(BaseModel):
    address: str = "127.0.0.1:50052"
    # The sidecar's TLS (its server side) and what its clients use to reach it (client side).
    tls: TlsSettings = TlsSettings()
    # A file holding the one token the sidecar requires and its clients send (empty: none).
    token_file: Path | None = None
    # Converted model copies (e.g. the de-quantised SmolLM2), shared by every data directory.
    cache_dir: Path = Path.home() / ".cache" / "sounding" / "models"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    torch_threads: int = Field(
        default=0, ge=0, description="CPU threads of torch and of the ONNX embedder; 0: their defaults"
    )
    embedder: EmbedderSettings = EmbedderSettings()
    generator: GeneratorSettings = GeneratorSettings()
    nli: NliSettings = NliSettings()


class SelectionSettings(BaseModel):
    """How Retrieve chooses its arms when the request names none (adaptive-strategy spec §5–§6)."""

    # The arms the selector chooses among (a request may still name any registered arm).
    arms: list[str] = ["dense", "lexical", "hyde", "query2doc", "multi_query", "grounded"]
    # LinUCB's exploration parameter α.
    alpha: float = Field(default=1.0, ge=0.0)
    # The first this many planned queries run every arm (a costly one on `costly_share` of them).
    cold_start_queries: int = Field(default=100, ge=0)
    # Every this many planned queries run every arm (0: never).
    force_all_every: int = Field(default=100, ge=0)
    exploration_rate: float = Field(default=0.3, ge=0.0, le=1.0)
    min_exploration_rate: float = Field(default=0.05, ge=0.0, le=1.0)
    exploration_decay: float = Field(default=0.99, gt=0.0, le=1.0)
    # An arm whose measured cost exceeds this multiple of the cheapest arm's (before its first
    # run: a generating arm) is costly: cold start, forced plans and exploration add one on
    # only `costly_share` of queries (learning.selection).
    costly_ratio: float = Field(default=10.0, gt=1.0)
    costly_share: float = Field(default=0.1, ge=0.0, le=1.0)
    seed: int = 0
    # Calibrate(BANDIT) retrains on the observations of this many most recent days.
    recalibration_window_days: float = Field(default=30.0, gt=0.0)


class ExpansionSettings(BaseModel):
    """The expansion loop's defaults (retrieval-uncertainty spec, "Iterative Retrieval Loop");
    a request may override each."""

    min_recall: float = Field(default=0.7, ge=0.0, le=1.0)
    # 0 turns the loop off.
    max_iterations: int = Field(default=3, ge=0, le=10)
    # Expanded queries over all iterations.
    budget: int = Field(default=5, ge=1, le=50)
    strategies: list[Strategy] = list(DEFAULT_STRATEGIES)
    # At most this many expanded queries per iteration.
    queries_per_step: int = Field(default=2, ge=1, le=10)
    # An expanded query's ranking weighs this share of the arms' mean fusion weight.
    fusion_weight: float = Field(default=0.5, gt=0.0, le=1.0)
    # The loop never reorders this many first positions of the result.
    protected_head: int = Field(default=10, ge=0, le=1000)
    # A Retrieve that sets no expansion options starts no step that is expected to end later
    # than this many milliseconds after the call began (core.expansion_gate).
    latency_budget_ms: float = Field(default=500.0, gt=0.0)
    # The latency a used document that a step brought into the result is worth: a step runs
    # when its sampled usefulness rate times this covers its expected latency.
    used_document_worth_ms: float = Field(default=1000.0, gt=0.0)


class RetrievalSettings(BaseModel):
    strategy_workers: int = Field(default=2, ge=1, le=64)
    # Custom Ray resources each strategy worker requires: {"sounding_worker": 1} places the workers
    # only on nodes that declare that resource (deploy/: the RayCluster's worker group does).
    worker_resources: dict[str, float] = {}
    # How a Retrieve that names no fusion fuses its rankings: "min_max" (normalised-score fusion)
    # or "rrf" (reciprocal rank fusion with `fusion_k`); core.fusion, bench/README.md "Zero-shot fusion".
    fusion: Literal["min_max", "rrf"] = "min_max"
    fusion_k: float = Field(default=60.0, gt=0)
    # Above this many chunks the dense arm uses LanceDB's vector search instead of an exact
    # in-memory scan of the table's vectors.
    exact_scan_max_chunks: int = Field(default=500_000, ge=0)
    selection: SelectionSettings = SelectionSettings()
    expansion: ExpansionSettings = ExpansionSettings()


class ToolSettings(BaseModel):
    """Tool routing and the loop that learns it from use (README, "Tool selection")."""

    # Tools whose use marks a mis-route: the agent fell back to a general-purpose tool.
    fallback_tools: list[str] = ["shell", "fs"]
    # A flagged request whose ranker margin (top-1 score minus the second's) is at least this is
    # labelled by the ranker itself; below it, by the teacher.
    margin_floor: float = Field(default=0.05, ge=0.0, le=2.0)
    # "generator": the sidecar's generator (the bundled model, or the OpenAI-compatible endpoint
    # it is configured with) labels the low-margin tail; "none": the free tier only.
    teacher: Literal["generator", "none"] = "generator"
    # The ranker's best this many tools (and the used tool, if registered) are the teacher's choices.
    teacher_candidates: int = Field(default=5, ge=2, le=50)
    teacher_timeout_s: float = Field(default=60.0, gt=0.0)
    # Take an agent's successful use (reported with success=true) of a registered tool that is not
    # a fallback as its label; false sends such uses through the two tiers like any other.
    trust_successful_uses: bool = True
    # The fold: a tool's description embedding counts this many times against its exemplars.
    description_weight: float = Field(default=2.0, ge=0.0)
    # The latest this many exemplars of a tool, per kind (trusted; free and teacher), are folded
    # into its centroid.
    max_exemplars_per_tool: int = Field(default=200, ge=1, le=100_000)
    # The free and teacher tiers' exemplars route only once this many trusted uses, held back from
    # the fold, are ranked right at least as often with them as without (README, "Tool selection").
    untrusted_validation_uses: int = Field(default=20, ge=1, le=256)
    # Events the learner processes together (one embedding call, one refold).
    batch_size: int = Field(default=64, ge=1, le=4096)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SOUNDING_", env_nested_delimiter="__")

    data_dir: Path = Path(".sounding")
    # What an acknowledgement guarantees (README, "Durability"): "fsync" flushes the store's
    # filesystem after every acknowledged commit (it survives a power loss); "process" skips the
    # flush (an acknowledged write survives the process dying, not the machine).
    durability: Literal["process", "fsync"] = "fsync"
    address: str = "127.0.0.1:50051"
    tls: TlsSettings = TlsSettings()
    auth: AuthSettings = AuthSettings()
    # Address of a Ray cluster to join; empty starts a local Ray runtime.
    ray_address: str = ""
    store: StoreSettings = StoreSettings()
    models: ModelsSettings = ModelsSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    tools: ToolSettings = ToolSettings()
    limits: LimitsSettings = LimitsSettings()
    # Logging of the server processes: SOUNDING_LOG_LEVEL, and SOUNDING_LOG_FORMAT=json for one
    # JSON object a line carrying the current trace and span ids.
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    # Set by the process that started this one (`sounding.stack`): health also answers for the
    # service `sounding.instance/<id>`, so the starter knows it reached its own child.
    instance_id: str = Field(default="", pattern=r"^[A-Za-z0-9-]{0,64}$")

    @property
    def store_location(self) -> StoreLocation:
        if not self.store.uri:
            return StoreLocation(str(self.data_dir / "lancedb"))
        return StoreLocation(self.store.uri, self.store.storage_options())

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"
