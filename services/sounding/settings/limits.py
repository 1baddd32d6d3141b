"""The service's limits (README, "Limits"): every bound on what one request, stream or process may
take, read as `SOUNDING_LIMITS__<GROUP>__<NAME>`."""

from __future__ import annotations

from pydantic import BaseModel, Field

MIB = 1024 * 1024


class TransportLimits(BaseModel):
    """The gRPC servers' own limits (orchestrator and sidecar alike)."""

    max_message_bytes: int = Field(default=16 * MIB, ge=64 * 1024, description="largest request message")
    max_concurrent_rpcs: int = Field(
        default=256,
        ge=1,
        description="authenticated calls in progress at once; more are answered RESOURCE_EXHAUSTED",
    )
    max_unauthenticated_calls: int = Field(
        default=64,
        ge=1,
        description="health and reflection calls without a token in progress at once, apart from the others",
    )
    max_unauthenticated_calls_per_peer: int = Field(
        default=8, ge=1, description="of those, from one client address"
    )
    max_streams_per_connection: int = Field(
        default=100, ge=1, description="HTTP/2 streams one connection may open"
    )
    keepalive_time_s: float = Field(
        default=60.0, gt=0, description="the server pings an idle connection this often"
    )
    keepalive_timeout_s: float = Field(
        default=20.0, gt=0, description="a ping unanswered this long closes the connection"
    )
    min_client_ping_interval_s: float = Field(
        default=10.0, ge=0, description="a client pinging more often than this is disconnected"
    )
    max_connection_idle_s: float = Field(
        default=600.0, gt=0, description="a connection without calls this long is closed"
    )
    drain_grace_s: float = Field(
        default=30.0,
        ge=0,
        description="on SIGTERM, in-flight calls get this long to finish (health NOT_SERVING at once)",
    )
    drain_delay_s: float = Field(
        default=0.0,
        ge=0,
        le=60.0,
        description="on SIGTERM, new calls are still taken this long after health turns NOT_SERVING, "
        "for balancers that check health to stop sending any (Envoy, a mesh)",
    )


class DeadlineLimits(BaseModel):
    """Server-side deadlines for calls whose client set none, and for client-streamed requests."""

    unary_s: float = Field(default=30.0, gt=0, description="unary calls (collections, metrics)")
    retrieve_s: float = Field(default=120.0, gt=0, description="a Retrieve stream")
    observe_s: float = Field(default=60.0, gt=0, description="an Observe stream")
    calibrate_s: float = Field(default=900.0, gt=0, description="a Calibrate stream")
    first_message_s: float = Field(
        default=10.0,
        gt=0,
        description="Inquire, Observe, IngestDocuments: until the first request message (Observe: every one)",
    )
    inquire_idle_s: float = Field(
        default=600.0, gt=0, description="Inquire: from a question until its answer"
    )
    ingest_idle_s: float = Field(default=300.0, gt=0, description="IngestDocuments: between two batches")
    generate_s: float = Field(default=600.0, gt=0, description="sidecar: a Generate stream")
    models_unary_s: float = Field(default=300.0, gt=0, description="sidecar: Embed, Entail, Cluster")
    readiness_probe_s: float = Field(
        default=2.0,
        gt=0,
        description="orchestrator health: one probe of a peer (two missed in a row: NOT_SERVING)",
    )


class CorpusLimits(BaseModel):
    max_collections: int = Field(default=1000, ge=1, description="collections of one tenant")
    max_description_chars: int = Field(default=4096, ge=0, description="a collection's description")
    max_page_size: int = Field(default=1000, ge=1, description="ListCollections page_size")
    max_documents_per_batch: int = Field(
        default=2000, ge=1, description="documents in one IngestDocuments message"
    )
    max_document_id_chars: int = Field(default=512, ge=1, description="a document id")
    max_title_chars: int = Field(default=1024, ge=0, description="a document's title")
    max_text_chars: int = Field(default=1 * MIB, ge=1, description="a document's text")
    max_metadata_entries: int = Field(default=64, ge=0, description="a document's metadata entries")
    max_metadata_key_chars: int = Field(default=256, ge=1, description="a metadata key")
    max_metadata_value_chars: int = Field(default=4096, ge=0, description="a metadata value")
    max_chunks_per_document: int = Field(default=1000, ge=1, description="chunks one document may make")
    max_chunks_per_batch: int = Field(default=10_000, ge=1, description="chunks one batch may make")
    max_concurrent_ingests: int = Field(default=4, ge=1, description="IngestDocuments streams at once")
    graph_max_entities_per_chunk: int = Field(
        default=16,
        ge=1,
        description="entities the graph takes from one chunk (co-occurrence pairs grow with its square)",
    )


class RetrieveLimits(BaseModel):
    max_query_chars: int = Field(default=4096, ge=1, description="RetrieveRequest.query")
    max_top_k: int = Field(default=1000, ge=1, description="RetrieveRequest.top_k")
    max_fusion_k: float = Field(default=1e6, gt=0, description="RetrieveRequest.fusion_k")
    max_expansion_iterations: int = Field(default=10, ge=0, description="ExpansionOptions.max_iterations")
    max_expansion_budget: int = Field(default=50, ge=1, description="ExpansionOptions.budget")
    max_concurrent: int = Field(default=64, ge=1, description="Retrieve streams at once")
    arm_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="an arm or expansion step still running after this is dropped from the result",
    )


class InquiryLimits(BaseModel):
    max_start_bytes: int = Field(default=8 * MIB, ge=1024, description="an InquiryStart message, serialized")
    max_hypotheses: int = Field(default=10_000, ge=1, description="InquiryStart.hypotheses")
    max_questions: int = Field(default=2_000, ge=1, description="InquiryStart.questions")
    max_cells: int = Field(
        default=1_000_000,
        ge=1,
        description="hypotheses x questions (the outcome table a session keeps and scores)",
    )
    max_id_chars: int = Field(default=256, ge=1, description="hypothesis, question and session ids")
    max_text_chars: int = Field(
        default=4096, ge=1, description="hypothesis descriptions, question texts, outcome values"
    )
    max_context_chars: int = Field(default=100_000, ge=0, description="InquiryStart.context")
    max_domain_parameters: int = Field(default=32, ge=0, description="InquiryStart.domain_parameters entries")
    max_parameter_chars: int = Field(default=256, ge=1, description="a domain parameter's key or value")
    max_answer_chars: int = Field(default=4096, ge=1, description="InquiryObservation.answer")
    max_claim_chars: int = Field(
        default=4096,
        ge=1,
        description="the corpus domain's claim (InquiryStart.context), which it searches with",
    )
    max_turns: int = Field(default=1000, ge=1, description="InquiryPolicy.max_turns")
    max_open_sessions: int = Field(default=64, ge=1, description="Inquire streams at once")
    max_open_llm_sessions: int = Field(
        default=4, ge=1, description="Inquire streams of the llm domain at once"
    )
    llm_max_turns: int = Field(default=25, ge=1, description="InquiryPolicy.max_turns in the llm domain")
    llm_max_hypotheses: int = Field(
        default=64, ge=2, description="the llm domain's hypotheses (answer choices)"
    )
    llm_max_problem_chars: int = Field(
        default=12_000,
        ge=1,
        description="the llm domain's context and hypotheses together (they are in every prompt)",
    )
    llm_max_samples: int = Field(default=32, ge=2, description="the llm domain's samples parameter")
    llm_max_tokens: int = Field(
        default=1024, ge=1, description="the llm domain's answer_tokens and question_tokens"
    )
    llm_max_session_tokens: int = Field(
        default=1_000_000, ge=1, description="the most tokens an llm session's settings may make it generate"
    )
    llm_generations_in_flight: int = Field(
        default=8, ge=1, description="generations one llm session runs at once"
    )
    session_retention_hours: float = Field(
        default=720,
        ge=0,
        description="a session idle this long (no step saved) is deleted, and resuming it finds "
        "nothing; 0 keeps sessions forever",
    )
    compute_threads: int = Field(
        default=2, ge=1, description="threads computing inquiry moves (EIG, look-ahead)"
    )
    compute_queue: int = Field(
        default=16,
        ge=0,
        description="moves waiting for a compute thread; more are answered RESOURCE_EXHAUSTED",
    )


class ObserveLimits(BaseModel):
    max_messages: int = Field(default=10_000, ge=1, description="observations in one Observe stream")
    max_stream_bytes: int = Field(
        default=32 * MIB, ge=1024, description="an Observe stream's messages together"
    )
    max_document_ids: int = Field(
        default=1000, ge=0, description="used or missed document ids in one outcome"
    )
    max_id_chars: int = Field(default=512, ge=1, description="retrieval, session and document ids")
    max_ground_truth_chars: int = Field(default=20_000, ge=1, description="InquiryOutcome.ground_truth")
    max_concurrent: int = Field(default=64, ge=1, description="Observe streams at once")


class ToolLimits(BaseModel):
    max_toolsets: int = Field(default=100, ge=1, description="toolsets of one tenant")
    max_tools: int = Field(default=10_000, ge=1, description="tools of one toolset")
    max_tools_per_put: int = Field(default=1000, ge=1, description="PutToolsRequest.tools")
    max_description_chars: int = Field(default=8192, ge=1, description="a tool's description")
    max_parameters_chars: int = Field(default=65_536, ge=0, description="a tool's parameters_json")
    max_request_chars: int = Field(default=8192, ge=1, description="a routed or observed request")
    max_top_k: int = Field(default=100, ge=1, description="RouteToolRequest.top_k")
    max_offered_tools: int = Field(
        default=1000, ge=0, description="offered_tools of a route or a tool-use event"
    )
    max_page_size: int = Field(default=1000, ge=1, description="ListToolsRequest.page_size")
    learner_queue: int = Field(
        default=10_000,
        ge=1,
        description=(
            "tool-use events waiting for the learner; more leave the queue (counted) and are "
            "processed from the store once it empties"
        ),
    )
    teacher_queue: int = Field(
        default=256,
        ge=1,
        description="flagged events with the teacher (asked or waiting); more are dropped as its failures",
    )


class CalibrateLimits(BaseModel):
    max_inline_states: int = Field(default=100_000, ge=0, description="CalibrateRequest.states")
    max_concurrent: int = Field(default=2, ge=1, description="Calibrate streams at once")


class ModelsLimits(BaseModel):
    """The sidecar's limits: its callers are Sounding's own processes, but what they send is
    shaped by clients."""

    max_embed_texts: int = Field(default=4096, ge=1, description="texts in one Embed")
    max_text_chars: int = Field(default=100_000, ge=1, description="one text of Embed, Entail or Cluster")
    max_entail_pairs: int = Field(default=4096, ge=1, description="pairs in one Entail")
    max_cluster_texts: int = Field(default=1024, ge=1, description="texts in one Cluster")
    max_cluster_entail_pairs: int = Field(
        default=8192,
        ge=0,
        description="NLI pairs one entailment Cluster may score; members left unscored stay apart",
    )
    max_messages: int = Field(default=64, ge=1, description="chat messages in one Generate")
    max_prompt_chars: int = Field(default=64_000, ge=1, description="the messages of one Generate together")
    max_prompt_tokens: int = Field(
        default=6144, ge=1, description="the local generator's prompt after templating"
    )
    max_new_tokens: int = Field(default=4096, ge=1, description="GenerateRequest.max_new_tokens")
    max_stop_strings: int = Field(
        default=8, ge=0, description="GenerateRequest.stop entries (each at most 64 characters)"
    )
    max_queued_generations: int = Field(
        default=256, ge=1, description="generations waiting or running; more are answered RESOURCE_EXHAUSTED"
    )
    max_queued_per_flow: int = Field(
        default=64, ge=1, description="of those, from one caller flow (a Retrieve, an inquiry session)"
    )


class MemoryLimits(BaseModel):
    """Bounds on what grows with traffic."""

    learning_history: int = Field(
        default=20_000,
        ge=1,
        description="observed queries the selector and the miss history look among (the latest)",
    )
    worker_snapshot_mib: int = Field(
        default=1024,
        ge=1,
        description="a strategy worker's in-memory vectors, over all collections (least recently used go)",
    )
    worker_graphs: int = Field(
        default=8, ge=1, description="collection graphs a strategy worker keeps in memory"
    )
    worker_lancedb_index_cache_mib: int = Field(
        default=256,
        ge=1,
        description="LanceDB's cache of index data in a strategy worker (the full-text indexes it searches)",
    )
    orchestrator_lancedb_index_cache_mib: int = Field(
        default=32,
        ge=1,
        description="LanceDB's cache of index data in the orchestrator (which writes the indexes)",
    )
    lancedb_metadata_cache_mib: int = Field(
        default=16, ge=1, description="LanceDB's cache of table versions' metadata, per process"
    )


class LimitsSettings(BaseModel):
    """Every limit on what a client can make Sounding do (README, "Limits")."""

    transport: TransportLimits = TransportLimits()
    deadlines: DeadlineLimits = DeadlineLimits()
    corpus: CorpusLimits = CorpusLimits()
    retrieve: RetrieveLimits = RetrieveLimits()
    inquiry: InquiryLimits = InquiryLimits()
    observe: ObserveLimits = ObserveLimits()
    tools: ToolLimits = ToolLimits()
    calibrate: CalibrateLimits = CalibrateLimits()
    models: ModelsLimits = ModelsLimits()
    memory: MemoryLimits = MemoryLimits()


def limit_rows(
    limits: LimitsSettings, defaults: LimitsSettings | None = None
) -> list[tuple[str, str, str, str]]:
    """(environment setting, default, value in `limits`, what it bounds) for every limit."""
    defaults = defaults or LimitsSettings()
    rows = []
    for group in LimitsSettings.model_fields:
        for name, field in type(getattr(defaults, group)).model_fields.items():
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
