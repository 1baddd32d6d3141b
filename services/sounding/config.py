"""Configuration, read from `SOUNDING_*` environment variables (nested with `__`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from sounding.auth import TokenEntry
from sounding.core.expansion import DEFAULT_STRATEGIES, Strategy
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


class StoreSettings(BaseModel):
    """Where the LanceDB store lives (README, "Deploy on Kubernetes"). Empty `uri`: the directory
    `<data_dir>/lancedb`. `s3://bucket/prefix`: S3 or an S3-compatible object store at `endpoint`
    (e.g. MinIO; `allow_http` for a plain-HTTP one), in `region`; without keys, the AWS default
    chain (environment, web identity, instance profile) supplies the credentials."""

    uri: str = Field("", pattern=r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?)?$")
    endpoint: str = ""
    region: str = ""
    allow_http: bool = False
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None

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
    """Bearer tokens of the public port (README, "Security"; `sounding.auth`)."""

    # A TOML file of [[tokens]] tables (sha256, tenant, role), read again when it changes.
    tokens_file: Path | None = None
    # More tokens, as JSON: [{"sha256": "...", "tenant": "...", "role": "..."}].
    tokens: list[TokenEntry] = []
    # Serve a non-loopback address without tokens (refused otherwise).
    allow_unauthenticated: bool = False


class EmbedderSettings(BaseModel):
    """The embedding model behind `Embed`, and dynamic micro-batching across concurrent callers."""

    # A sentence-transformers model (a directory, or a hub id in the local cache); empty: the bundled
    # all-MiniLM-L6-v2. Collections keep the model they were made with.
    model: str = ""
    max_batch_size: int = Field(64, ge=1, le=4096)
    # How long the first request of a batch waits for company before the batch runs. With 0 a
    # lone request runs at once, and requests arriving while a batch encodes still form the next.
    max_wait_ms: float = Field(0.0, ge=0.0, le=1000.0)
    # Texts per forward pass within a batch: a pass's memory grows with texts x length^2, so
    # long texts in large passes make the sidecar's resident memory spike.
    forward_batch_size: int = Field(8, ge=1, le=4096)
    # Batches of at most this many texts encode on one CPU thread (see models.embedder.Embedder).
    single_thread_max_texts: int = Field(4, ge=0, le=4096)


class GeneratorSettings(BaseModel):
    """Which generator `Generate` uses: the bundled SmolLM2 or an OpenAI-compatible endpoint."""

    backend: Literal["local", "openai"] = "local"
    # The local backend batches concurrent generations that decode alike.
    max_batch_size: int = Field(8, ge=1, le=256)
    max_wait_ms: float = Field(5.0, ge=0.0, le=1000.0)
    # A batch's prompt tokens, padding included (jobs x longest prompt), at most this many: the
    # first forward pass's memory grows with them. A longer prompt runs in a batch of its own.
    max_batch_prompt_tokens: int = Field(1024, ge=1)
    # Load the model while the sidecar starts (it reports NOT_SERVING meanwhile), so the first
    # Retrieve with a generating arm does not spend its arm timeout on loading it.
    preload: bool = True
    # Greedy generations kept in `<data dir>/cache/generations.sqlite` (0: no cache). A repeated
    # deterministic request is then answered from the cache instead of decoded again.
    cache_max_entries: int = Field(0, ge=0)
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
    # Training budget of Sounding's own model; a cached copy trained with less is trained again.
    train_max_minutes: float = Field(20.0, gt=0.0)
    max_batch_size: int = Field(64, ge=1, le=4096)
    max_wait_ms: float = Field(0.0, ge=0.0, le=1000.0)
    forward_batch_size: int = Field(8, ge=1, le=4096)  # pairs per forward pass, as the embedder's


class ModelsSettings(BaseModel):
    address: str = "127.0.0.1:50052"
    # The sidecar's TLS (its server side) and what its clients use to reach it (client side).
    tls: TlsSettings = TlsSettings()
    # A file holding the one token the sidecar requires and its clients send (empty: none).
    token_file: Path | None = None
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
    # Custom Ray resources each strategy worker requires: {"sounding_worker": 1} places the workers
    # only on nodes that declare that resource (deploy/: the RayCluster's worker group does).
    worker_resources: dict[str, float] = {}
    fusion_k: float = Field(60.0, gt=0)
    # Above this many chunks the dense arm uses LanceDB's vector search instead of an exact
    # in-memory scan of the table's vectors.
    exact_scan_max_chunks: int = Field(500_000, ge=0)
    selection: SelectionSettings = SelectionSettings()
    expansion: ExpansionSettings = ExpansionSettings()


MIB = 1024 * 1024


class TransportLimits(BaseModel):
    """The gRPC servers' own limits (orchestrator and sidecar alike)."""

    max_message_bytes: int = Field(16 * MIB, ge=64 * 1024, description="largest request message")
    max_concurrent_rpcs: int = Field(
        256, ge=1, description="calls in progress at once; more are answered RESOURCE_EXHAUSTED"
    )
    max_streams_per_connection: int = Field(100, ge=1, description="HTTP/2 streams one connection may open")
    keepalive_time_s: float = Field(60.0, gt=0, description="the server pings an idle connection this often")
    keepalive_timeout_s: float = Field(
        20.0, gt=0, description="a ping unanswered this long closes the connection"
    )
    min_client_ping_interval_s: float = Field(
        10.0, ge=0, description="a client pinging more often than this is disconnected"
    )
    max_connection_idle_s: float = Field(
        600.0, gt=0, description="a connection without calls this long is closed"
    )
    drain_grace_s: float = Field(
        30.0,
        ge=0,
        description="on SIGTERM, in-flight calls get this long to finish (health NOT_SERVING at once)",
    )


class DeadlineLimits(BaseModel):
    """Server-side deadlines for calls whose client set none, and for client-streamed requests."""

    unary_s: float = Field(30.0, gt=0, description="unary calls (collections, metrics)")
    retrieve_s: float = Field(120.0, gt=0, description="a Retrieve stream")
    observe_s: float = Field(60.0, gt=0, description="an Observe stream")
    calibrate_s: float = Field(900.0, gt=0, description="a Calibrate stream")
    first_message_s: float = Field(
        10.0,
        gt=0,
        description="Inquire, Observe, IngestDocuments: until the first request message (Observe: every one)",
    )
    inquire_idle_s: float = Field(600.0, gt=0, description="Inquire: from a question until its answer")
    ingest_idle_s: float = Field(300.0, gt=0, description="IngestDocuments: between two batches")
    generate_s: float = Field(600.0, gt=0, description="sidecar: a Generate stream")
    models_unary_s: float = Field(300.0, gt=0, description="sidecar: Embed, Entail, Cluster")


class CorpusLimits(BaseModel):
    max_collections: int = Field(1000, ge=1, description="collections of one tenant")
    max_description_chars: int = Field(4096, ge=0, description="a collection's description")
    max_page_size: int = Field(1000, ge=1, description="ListCollections page_size")
    max_documents_per_batch: int = Field(2000, ge=1, description="documents in one IngestDocuments message")
    max_document_id_chars: int = Field(512, ge=1, description="a document id")
    max_title_chars: int = Field(1024, ge=0, description="a document's title")
    max_text_chars: int = Field(1 * MIB, ge=1, description="a document's text")
    max_metadata_entries: int = Field(64, ge=0, description="a document's metadata entries")
    max_metadata_key_chars: int = Field(256, ge=1, description="a metadata key")
    max_metadata_value_chars: int = Field(4096, ge=0, description="a metadata value")
    max_chunks_per_document: int = Field(1000, ge=1, description="chunks one document may make")
    max_chunks_per_batch: int = Field(10_000, ge=1, description="chunks one batch may make")
    max_concurrent_ingests: int = Field(4, ge=1, description="IngestDocuments streams at once")
    graph_max_entities_per_chunk: int = Field(
        16,
        ge=1,
        description="entities the graph takes from one chunk (co-occurrence pairs grow with its square)",
    )


class RetrieveLimits(BaseModel):
    max_query_chars: int = Field(4096, ge=1, description="RetrieveRequest.query")
    max_top_k: int = Field(1000, ge=1, description="RetrieveRequest.top_k")
    max_fusion_k: float = Field(1e6, gt=0, description="RetrieveRequest.fusion_k")
    max_expansion_iterations: int = Field(10, ge=0, description="ExpansionOptions.max_iterations")
    max_expansion_budget: int = Field(50, ge=1, description="ExpansionOptions.budget")
    max_concurrent: int = Field(64, ge=1, description="Retrieve streams at once")
    arm_timeout_s: float = Field(
        30.0, gt=0, description="an arm or expansion step still running after this is dropped from the result"
    )


class InquiryLimits(BaseModel):
    max_start_bytes: int = Field(1 * MIB, ge=1024, description="an InquiryStart message, serialized")
    max_hypotheses: int = Field(10_000, ge=1, description="InquiryStart.hypotheses")
    max_questions: int = Field(2_000, ge=1, description="InquiryStart.questions")
    max_cells: int = Field(
        1_000_000, ge=1, description="hypotheses x questions (the outcome table a session keeps and scores)"
    )
    max_id_chars: int = Field(256, ge=1, description="hypothesis, question and session ids")
    max_text_chars: int = Field(
        4096, ge=1, description="hypothesis descriptions, question texts, outcome values"
    )
    max_context_chars: int = Field(100_000, ge=0, description="InquiryStart.context")
    max_domain_parameters: int = Field(32, ge=0, description="InquiryStart.domain_parameters entries")
    max_parameter_chars: int = Field(256, ge=1, description="a domain parameter's key or value")
    max_answer_chars: int = Field(4096, ge=1, description="InquiryObservation.answer")
    max_turns: int = Field(1000, ge=1, description="InquiryPolicy.max_turns")
    max_open_sessions: int = Field(64, ge=1, description="Inquire streams at once")
    max_open_llm_sessions: int = Field(4, ge=1, description="Inquire streams of the llm domain at once")
    llm_max_turns: int = Field(25, ge=1, description="InquiryPolicy.max_turns in the llm domain")
    llm_max_hypotheses: int = Field(64, ge=2, description="the llm domain's hypotheses (answer choices)")
    llm_max_problem_chars: int = Field(
        12_000,
        ge=1,
        description="the llm domain's context and hypotheses together (they are in every prompt)",
    )
    llm_max_samples: int = Field(32, ge=2, description="the llm domain's samples parameter")
    llm_max_tokens: int = Field(1024, ge=1, description="the llm domain's answer_tokens and question_tokens")
    llm_max_session_tokens: int = Field(
        1_000_000, ge=1, description="the most tokens an llm session's settings may make it generate"
    )
    llm_generations_in_flight: int = Field(8, ge=1, description="generations one llm session runs at once")
    compute_threads: int = Field(2, ge=1, description="threads computing inquiry moves (EIG, look-ahead)")
    compute_queue: int = Field(
        16, ge=0, description="moves waiting for a compute thread; more are answered RESOURCE_EXHAUSTED"
    )


class ObserveLimits(BaseModel):
    max_messages: int = Field(10_000, ge=1, description="observations in one Observe stream")
    max_stream_bytes: int = Field(32 * MIB, ge=1024, description="an Observe stream's messages together")
    max_document_ids: int = Field(1000, ge=0, description="used or missed document ids in one outcome")
    max_id_chars: int = Field(512, ge=1, description="retrieval, session and document ids")
    max_ground_truth_chars: int = Field(20_000, ge=1, description="InquiryOutcome.ground_truth")
    max_concurrent: int = Field(64, ge=1, description="Observe streams at once")


class CalibrateLimits(BaseModel):
    max_inline_states: int = Field(100_000, ge=0, description="CalibrateRequest.states")
    max_concurrent: int = Field(2, ge=1, description="Calibrate streams at once")


class ModelsLimits(BaseModel):
    """The sidecar's limits: its callers are Sounding's own processes, but what they send is
    shaped by clients."""

    max_embed_texts: int = Field(4096, ge=1, description="texts in one Embed")
    max_text_chars: int = Field(100_000, ge=1, description="one text of Embed, Entail or Cluster")
    max_entail_pairs: int = Field(4096, ge=1, description="pairs in one Entail")
    max_cluster_texts: int = Field(1024, ge=1, description="texts in one Cluster")
    max_cluster_entail_pairs: int = Field(
        8192, ge=0, description="NLI pairs one entailment Cluster may score; members left unscored stay apart"
    )
    max_messages: int = Field(64, ge=1, description="chat messages in one Generate")
    max_prompt_chars: int = Field(64_000, ge=1, description="the messages of one Generate together")
    max_prompt_tokens: int = Field(6144, ge=1, description="the local generator's prompt after templating")
    max_new_tokens: int = Field(4096, ge=1, description="GenerateRequest.max_new_tokens")
    max_stop_strings: int = Field(
        8, ge=0, description="GenerateRequest.stop entries (each at most 64 characters)"
    )
    max_queued_generations: int = Field(
        256, ge=1, description="generations waiting or running; more are answered RESOURCE_EXHAUSTED"
    )
    max_queued_per_flow: int = Field(
        64, ge=1, description="of those, from one caller flow (a Retrieve, an inquiry session)"
    )


class MemoryLimits(BaseModel):
    """Bounds on what grows with traffic."""

    learning_history: int = Field(
        20_000, ge=1, description="observed queries the selector and the miss history look among (the latest)"
    )
    worker_snapshot_mib: int = Field(
        1024,
        ge=1,
        description="a strategy worker's in-memory vectors, over all collections (least recently used go)",
    )
    worker_graphs: int = Field(8, ge=1, description="collection graphs a strategy worker keeps in memory")
    worker_lancedb_index_cache_mib: int = Field(
        256,
        ge=1,
        description="LanceDB's cache of index data in a strategy worker (the full-text indexes it searches)",
    )
    orchestrator_lancedb_index_cache_mib: int = Field(
        32, ge=1, description="LanceDB's cache of index data in the orchestrator (which writes the indexes)"
    )
    lancedb_metadata_cache_mib: int = Field(
        16, ge=1, description="LanceDB's cache of table versions' metadata, per process"
    )


class LimitsSettings(BaseModel):
    """Every limit on what a client can make Sounding do (README, "Limits")."""

    transport: TransportLimits = TransportLimits()
    deadlines: DeadlineLimits = DeadlineLimits()
    corpus: CorpusLimits = CorpusLimits()
    retrieve: RetrieveLimits = RetrieveLimits()
    inquiry: InquiryLimits = InquiryLimits()
    observe: ObserveLimits = ObserveLimits()
    calibrate: CalibrateLimits = CalibrateLimits()
    models: ModelsLimits = ModelsLimits()
    memory: MemoryLimits = MemoryLimits()


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
    limits: LimitsSettings = LimitsSettings()
    # Logging of the server processes: SOUNDING_LOG_LEVEL, and SOUNDING_LOG_FORMAT=json for one
    # JSON object a line carrying the current trace and span ids.
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"

    @property
    def store_location(self) -> StoreLocation:
        if not self.store.uri:
            return StoreLocation(str(self.data_dir / "lancedb"))
        return StoreLocation(self.store.uri, self.store.storage_options())

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"


def limit_rows(
    limits: LimitsSettings, defaults: LimitsSettings | None = None
) -> list[tuple[str, str, str, str]]:
    """(environment setting, default, value in `limits`, what it bounds) for every limit."""
    defaults = defaults or LimitsSettings()
    rows = []
    for group, model in LimitsSettings.model_fields.items():
        for name, field in model.annotation.model_fields.items():
            rows.append(
                (
                    f"SOUNDING_LIMITS__{group.upper()}__{name.upper()}",
                    _shown(getattr(getattr(defaults, group), name)),
                    _shown(getattr(getattr(limits, group), name)),
                    field.description or "",
                )
            )
    return rows


def _shown(value: float | int) -> str:
    if isinstance(value, float) and not value.is_integer():
        return repr(value)
    return f"{int(value):,}"
