from sounding_api.buf.validate import validate_pb2 as _validate_pb2
from sounding_api.sounding.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FusionMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FUSION_METHOD_UNSPECIFIED: _ClassVar[FusionMethod]
    FUSION_METHOD_MIN_MAX: _ClassVar[FusionMethod]
    FUSION_METHOD_RRF: _ClassVar[FusionMethod]

class StoppingReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STOPPING_REASON_UNSPECIFIED: _ClassVar[StoppingReason]
    STOPPING_REASON_CONFIDENCE_REACHED: _ClassVar[StoppingReason]
    STOPPING_REASON_BUDGET_EXHAUSTED: _ClassVar[StoppingReason]
    STOPPING_REASON_MAX_QUERIES_REACHED: _ClassVar[StoppingReason]
    STOPPING_REASON_DIMINISHING_RETURNS: _ClassVar[StoppingReason]
    STOPPING_REASON_NO_VIABLE_QUERIES: _ClassVar[StoppingReason]
    STOPPING_REASON_TARGET_OUT_OF_REACH: _ClassVar[StoppingReason]

class Feedback(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FEEDBACK_UNSPECIFIED: _ClassVar[Feedback]
    FEEDBACK_HELPFUL: _ClassVar[Feedback]
    FEEDBACK_NOT_HELPFUL: _ClassVar[Feedback]

class CalibrationTarget(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CALIBRATION_TARGET_UNSPECIFIED: _ClassVar[CalibrationTarget]
    CALIBRATION_TARGET_BANDIT: _ClassVar[CalibrationTarget]
    CALIBRATION_TARGET_MISS_RATE: _ClassVar[CalibrationTarget]
    CALIBRATION_TARGET_STOP_THRESHOLD: _ClassVar[CalibrationTarget]
    CALIBRATION_TARGET_CONFIDENCE: _ClassVar[CalibrationTarget]
    CALIBRATION_TARGET_QUERY_ADAPTER: _ClassVar[CalibrationTarget]
FUSION_METHOD_UNSPECIFIED: FusionMethod
FUSION_METHOD_MIN_MAX: FusionMethod
FUSION_METHOD_RRF: FusionMethod
STOPPING_REASON_UNSPECIFIED: StoppingReason
STOPPING_REASON_CONFIDENCE_REACHED: StoppingReason
STOPPING_REASON_BUDGET_EXHAUSTED: StoppingReason
STOPPING_REASON_MAX_QUERIES_REACHED: StoppingReason
STOPPING_REASON_DIMINISHING_RETURNS: StoppingReason
STOPPING_REASON_NO_VIABLE_QUERIES: StoppingReason
STOPPING_REASON_TARGET_OUT_OF_REACH: StoppingReason
FEEDBACK_UNSPECIFIED: Feedback
FEEDBACK_HELPFUL: Feedback
FEEDBACK_NOT_HELPFUL: Feedback
CALIBRATION_TARGET_UNSPECIFIED: CalibrationTarget
CALIBRATION_TARGET_BANDIT: CalibrationTarget
CALIBRATION_TARGET_MISS_RATE: CalibrationTarget
CALIBRATION_TARGET_STOP_THRESHOLD: CalibrationTarget
CALIBRATION_TARGET_CONFIDENCE: CalibrationTarget
CALIBRATION_TARGET_QUERY_ADAPTER: CalibrationTarget

class RetrieveRequest(_message.Message):
    __slots__ = ("collection", "query", "top_k", "arms", "fusion_k", "omit_text", "synthesis_confidence", "expansion", "without_learned_ranking", "fusion")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    ARMS_FIELD_NUMBER: _ClassVar[int]
    FUSION_K_FIELD_NUMBER: _ClassVar[int]
    OMIT_TEXT_FIELD_NUMBER: _ClassVar[int]
    SYNTHESIS_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    EXPANSION_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_LEARNED_RANKING_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    collection: str
    query: str
    top_k: int
    arms: _containers.RepeatedScalarFieldContainer[str]
    fusion_k: float
    omit_text: bool
    synthesis_confidence: float
    expansion: ExpansionOptions
    without_learned_ranking: bool
    fusion: FusionMethod
    def __init__(self, collection: _Optional[str] = ..., query: _Optional[str] = ..., top_k: _Optional[int] = ..., arms: _Optional[_Iterable[str]] = ..., fusion_k: _Optional[float] = ..., omit_text: _Optional[bool] = ..., synthesis_confidence: _Optional[float] = ..., expansion: _Optional[_Union[ExpansionOptions, _Mapping]] = ..., without_learned_ranking: _Optional[bool] = ..., fusion: _Optional[_Union[FusionMethod, str]] = ...) -> None: ...

class ExpansionOptions(_message.Message):
    __slots__ = ("min_recall", "max_iterations", "budget", "strategies")
    MIN_RECALL_FIELD_NUMBER: _ClassVar[int]
    MAX_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    STRATEGIES_FIELD_NUMBER: _ClassVar[int]
    min_recall: float
    max_iterations: int
    budget: int
    strategies: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, min_recall: _Optional[float] = ..., max_iterations: _Optional[int] = ..., budget: _Optional[int] = ..., strategies: _Optional[_Iterable[str]] = ...) -> None: ...

class RetrieveResponse(_message.Message):
    __slots__ = ("plan", "strategy_result", "fused", "expansion", "final")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_RESULT_FIELD_NUMBER: _ClassVar[int]
    FUSED_FIELD_NUMBER: _ClassVar[int]
    EXPANSION_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    plan: Plan
    strategy_result: StrategyResult
    fused: Fused
    expansion: Expansion
    final: Final
    def __init__(self, plan: _Optional[_Union[Plan, _Mapping]] = ..., strategy_result: _Optional[_Union[StrategyResult, _Mapping]] = ..., fused: _Optional[_Union[Fused, _Mapping]] = ..., expansion: _Optional[_Union[Expansion, _Mapping]] = ..., final: _Optional[_Union[Final, _Mapping]] = ...) -> None: ...

class Plan(_message.Message):
    __slots__ = ("retrieval_id", "arms", "mode", "query_adapter_version", "fusion")
    RETRIEVAL_ID_FIELD_NUMBER: _ClassVar[int]
    ARMS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    QUERY_ADAPTER_VERSION_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    retrieval_id: str
    arms: _containers.RepeatedCompositeFieldContainer[PlannedArm]
    mode: str
    query_adapter_version: int
    fusion: FusionMethod
    def __init__(self, retrieval_id: _Optional[str] = ..., arms: _Optional[_Iterable[_Union[PlannedArm, _Mapping]]] = ..., mode: _Optional[str] = ..., query_adapter_version: _Optional[int] = ..., fusion: _Optional[_Union[FusionMethod, str]] = ...) -> None: ...

class PlannedArm(_message.Message):
    __slots__ = ("arm", "chosen", "score", "exploration", "fusion_weight", "reason")
    ARM_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    EXPLORATION_FIELD_NUMBER: _ClassVar[int]
    FUSION_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    arm: str
    chosen: bool
    score: float
    exploration: bool
    fusion_weight: float
    reason: str
    def __init__(self, arm: _Optional[str] = ..., chosen: _Optional[bool] = ..., score: _Optional[float] = ..., exploration: _Optional[bool] = ..., fusion_weight: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class StrategyResult(_message.Message):
    __slots__ = ("arm", "hits", "latency_ms", "generated_text", "cost_ms")
    ARM_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TEXT_FIELD_NUMBER: _ClassVar[int]
    COST_MS_FIELD_NUMBER: _ClassVar[int]
    arm: str
    hits: _containers.RepeatedCompositeFieldContainer[Hit]
    latency_ms: float
    generated_text: str
    cost_ms: float
    def __init__(self, arm: _Optional[str] = ..., hits: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., latency_ms: _Optional[float] = ..., generated_text: _Optional[str] = ..., cost_ms: _Optional[float] = ...) -> None: ...

class Fused(_message.Message):
    __slots__ = ("hits", "arms")
    HITS_FIELD_NUMBER: _ClassVar[int]
    ARMS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[Hit]
    arms: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, hits: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., arms: _Optional[_Iterable[str]] = ...) -> None: ...

class Expansion(_message.Message):
    __slots__ = ("iteration", "strategy", "gap", "query", "new_hits", "queries", "result_count", "estimated_recall")
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    NEW_HITS_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    RESULT_COUNT_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_RECALL_FIELD_NUMBER: _ClassVar[int]
    iteration: int
    strategy: str
    gap: str
    query: str
    new_hits: int
    queries: _containers.RepeatedScalarFieldContainer[str]
    result_count: int
    estimated_recall: _common_pb2.Confidence
    def __init__(self, iteration: _Optional[int] = ..., strategy: _Optional[str] = ..., gap: _Optional[str] = ..., query: _Optional[str] = ..., new_hits: _Optional[int] = ..., queries: _Optional[_Iterable[str]] = ..., result_count: _Optional[int] = ..., estimated_recall: _Optional[_Union[_common_pb2.Confidence, _Mapping]] = ...) -> None: ...

class Final(_message.Message):
    __slots__ = ("retrieval_id", "hits", "uncertainty", "confidence", "latency_ms", "failed_arms")
    RETRIEVAL_ID_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    UNCERTAINTY_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    FAILED_ARMS_FIELD_NUMBER: _ClassVar[int]
    retrieval_id: str
    hits: _containers.RepeatedCompositeFieldContainer[Hit]
    uncertainty: RetrievalUncertainty
    confidence: _common_pb2.Confidence
    latency_ms: float
    failed_arms: _containers.RepeatedCompositeFieldContainer[ArmFailure]
    def __init__(self, retrieval_id: _Optional[str] = ..., hits: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., uncertainty: _Optional[_Union[RetrievalUncertainty, _Mapping]] = ..., confidence: _Optional[_Union[_common_pb2.Confidence, _Mapping]] = ..., latency_ms: _Optional[float] = ..., failed_arms: _Optional[_Iterable[_Union[ArmFailure, _Mapping]]] = ...) -> None: ...

class ArmFailure(_message.Message):
    __slots__ = ("arm", "code", "message")
    ARM_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    arm: str
    code: str
    message: str
    def __init__(self, arm: _Optional[str] = ..., code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class Hit(_message.Message):
    __slots__ = ("document_id", "chunk_id", "text", "title", "score", "contributions", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTIONS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    chunk_id: str
    text: str
    title: str
    score: float
    contributions: _containers.RepeatedCompositeFieldContainer[ArmRank]
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, document_id: _Optional[str] = ..., chunk_id: _Optional[str] = ..., text: _Optional[str] = ..., title: _Optional[str] = ..., score: _Optional[float] = ..., contributions: _Optional[_Iterable[_Union[ArmRank, _Mapping]]] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ArmRank(_message.Message):
    __slots__ = ("arm", "rank", "score")
    ARM_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    arm: str
    rank: int
    score: float
    def __init__(self, arm: _Optional[str] = ..., rank: _Optional[int] = ..., score: _Optional[float] = ...) -> None: ...

class RetrievalUncertainty(_message.Message):
    __slots__ = ("miss_rate", "coverage_estimate", "query_expansions", "estimated_recall", "query_difficulty", "corpus_coverage", "semantic_gaps")
    MISS_RATE_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    QUERY_EXPANSIONS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_RECALL_FIELD_NUMBER: _ClassVar[int]
    QUERY_DIFFICULTY_FIELD_NUMBER: _ClassVar[int]
    CORPUS_COVERAGE_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_GAPS_FIELD_NUMBER: _ClassVar[int]
    miss_rate: _common_pb2.Confidence
    coverage_estimate: _common_pb2.Confidence
    query_expansions: _containers.RepeatedCompositeFieldContainer[QueryExpansion]
    estimated_recall: _common_pb2.Confidence
    query_difficulty: _common_pb2.Confidence
    corpus_coverage: _common_pb2.Confidence
    semantic_gaps: _containers.RepeatedCompositeFieldContainer[SemanticGap]
    def __init__(self, miss_rate: _Optional[_Union[_common_pb2.Confidence, _Mapping]] = ..., coverage_estimate: _Optional[_Union[_common_pb2.Confidence, _Mapping]] = ..., query_expansions: _Optional[_Iterable[_Union[QueryExpansion, _Mapping]]] = ..., estimated_recall: _Optional[_Union[_common_pb2.Confidence, _Mapping]] = ..., query_difficulty: _Optional[_Union[_common_pb2.Confidence, _Mapping]] = ..., corpus_coverage: _Optional[_Union[_common_pb2.Confidence, _Mapping]] = ..., semantic_gaps: _Optional[_Iterable[_Union[SemanticGap, _Mapping]]] = ...) -> None: ...

class QueryExpansion(_message.Message):
    __slots__ = ("original", "expanded", "strategy", "result_count", "found_unique_results")
    ORIGINAL_FIELD_NUMBER: _ClassVar[int]
    EXPANDED_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    RESULT_COUNT_FIELD_NUMBER: _ClassVar[int]
    FOUND_UNIQUE_RESULTS_FIELD_NUMBER: _ClassVar[int]
    original: str
    expanded: str
    strategy: str
    result_count: int
    found_unique_results: bool
    def __init__(self, original: _Optional[str] = ..., expanded: _Optional[str] = ..., strategy: _Optional[str] = ..., result_count: _Optional[int] = ..., found_unique_results: _Optional[bool] = ...) -> None: ...

class SemanticGap(_message.Message):
    __slots__ = ("kind", "description", "severity", "mitigation", "miss_likelihood")
    KIND_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    MITIGATION_FIELD_NUMBER: _ClassVar[int]
    MISS_LIKELIHOOD_FIELD_NUMBER: _ClassVar[int]
    kind: str
    description: str
    severity: float
    mitigation: str
    miss_likelihood: _common_pb2.Confidence
    def __init__(self, kind: _Optional[str] = ..., description: _Optional[str] = ..., severity: _Optional[float] = ..., mitigation: _Optional[str] = ..., miss_likelihood: _Optional[_Union[_common_pb2.Confidence, _Mapping]] = ...) -> None: ...

class InquireRequest(_message.Message):
    __slots__ = ("start", "resume", "observation")
    START_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    start: InquiryStart
    resume: InquiryResume
    observation: InquiryObservation
    def __init__(self, start: _Optional[_Union[InquiryStart, _Mapping]] = ..., resume: _Optional[_Union[InquiryResume, _Mapping]] = ..., observation: _Optional[_Union[InquiryObservation, _Mapping]] = ...) -> None: ...

class InquiryStart(_message.Message):
    __slots__ = ("domain", "domain_parameters", "hypotheses", "questions", "policy", "context")
    class DomainParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    HYPOTHESES_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    domain: str
    domain_parameters: _containers.ScalarMap[str, str]
    hypotheses: _containers.RepeatedCompositeFieldContainer[Hypothesis]
    questions: _containers.RepeatedCompositeFieldContainer[CandidateQuestion]
    policy: InquiryPolicy
    context: str
    def __init__(self, domain: _Optional[str] = ..., domain_parameters: _Optional[_Mapping[str, str]] = ..., hypotheses: _Optional[_Iterable[_Union[Hypothesis, _Mapping]]] = ..., questions: _Optional[_Iterable[_Union[CandidateQuestion, _Mapping]]] = ..., policy: _Optional[_Union[InquiryPolicy, _Mapping]] = ..., context: _Optional[str] = ...) -> None: ...

class Hypothesis(_message.Message):
    __slots__ = ("id", "description", "prior")
    ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PRIOR_FIELD_NUMBER: _ClassVar[int]
    id: str
    description: str
    prior: float
    def __init__(self, id: _Optional[str] = ..., description: _Optional[str] = ..., prior: _Optional[float] = ...) -> None: ...

class CandidateQuestion(_message.Message):
    __slots__ = ("id", "text", "cost", "outcomes")
    class OutcomesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    cost: float
    outcomes: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., cost: _Optional[float] = ..., outcomes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class InquiryPolicy(_message.Message):
    __slots__ = ("question_selection", "stop_rule", "cost_sensitivity", "exploration_weight", "max_turns", "target_confidence", "cost_budget", "seed", "min_information_gain")
    QUESTION_SELECTION_FIELD_NUMBER: _ClassVar[int]
    STOP_RULE_FIELD_NUMBER: _ClassVar[int]
    COST_SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    EXPLORATION_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    TARGET_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    COST_BUDGET_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MIN_INFORMATION_GAIN_FIELD_NUMBER: _ClassVar[int]
    question_selection: str
    stop_rule: str
    cost_sensitivity: float
    exploration_weight: float
    max_turns: int
    target_confidence: float
    cost_budget: float
    seed: int
    min_information_gain: float
    def __init__(self, question_selection: _Optional[str] = ..., stop_rule: _Optional[str] = ..., cost_sensitivity: _Optional[float] = ..., exploration_weight: _Optional[float] = ..., max_turns: _Optional[int] = ..., target_confidence: _Optional[float] = ..., cost_budget: _Optional[float] = ..., seed: _Optional[int] = ..., min_information_gain: _Optional[float] = ...) -> None: ...

class InquiryResume(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class InquiryObservation(_message.Message):
    __slots__ = ("question_id", "answer")
    QUESTION_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    question_id: str
    answer: str
    def __init__(self, question_id: _Optional[str] = ..., answer: _Optional[str] = ...) -> None: ...

class InquireResponse(_message.Message):
    __slots__ = ("belief", "ask", "answer", "evidence")
    BELIEF_FIELD_NUMBER: _ClassVar[int]
    ASK_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    belief: Belief
    ask: Ask
    answer: InquiryAnswer
    evidence: Evidence
    def __init__(self, belief: _Optional[_Union[Belief, _Mapping]] = ..., ask: _Optional[_Union[Ask, _Mapping]] = ..., answer: _Optional[_Union[InquiryAnswer, _Mapping]] = ..., evidence: _Optional[_Union[Evidence, _Mapping]] = ...) -> None: ...

class Evidence(_message.Message):
    __slots__ = ("session_id", "turn", "question_id", "query", "strategy", "hits", "sentences", "sentences_read", "strongest_entailment", "strongest_contradiction", "outcome", "reached", "predicted_reach", "expected_information_gain", "actual_information_gain", "latency_ms", "target_chance")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    QUESTION_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    SENTENCES_FIELD_NUMBER: _ClassVar[int]
    SENTENCES_READ_FIELD_NUMBER: _ClassVar[int]
    STRONGEST_ENTAILMENT_FIELD_NUMBER: _ClassVar[int]
    STRONGEST_CONTRADICTION_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REACHED_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_REACH_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_INFORMATION_GAIN_FIELD_NUMBER: _ClassVar[int]
    ACTUAL_INFORMATION_GAIN_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    TARGET_CHANCE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    turn: int
    question_id: str
    query: str
    strategy: str
    hits: _containers.RepeatedCompositeFieldContainer[EvidenceHit]
    sentences: _containers.RepeatedCompositeFieldContainer[EvidenceSentence]
    sentences_read: int
    strongest_entailment: float
    strongest_contradiction: float
    outcome: str
    reached: bool
    predicted_reach: float
    expected_information_gain: float
    actual_information_gain: float
    latency_ms: float
    target_chance: float
    def __init__(self, session_id: _Optional[str] = ..., turn: _Optional[int] = ..., question_id: _Optional[str] = ..., query: _Optional[str] = ..., strategy: _Optional[str] = ..., hits: _Optional[_Iterable[_Union[EvidenceHit, _Mapping]]] = ..., sentences: _Optional[_Iterable[_Union[EvidenceSentence, _Mapping]]] = ..., sentences_read: _Optional[int] = ..., strongest_entailment: _Optional[float] = ..., strongest_contradiction: _Optional[float] = ..., outcome: _Optional[str] = ..., reached: _Optional[bool] = ..., predicted_reach: _Optional[float] = ..., expected_information_gain: _Optional[float] = ..., actual_information_gain: _Optional[float] = ..., latency_ms: _Optional[float] = ..., target_chance: _Optional[float] = ...) -> None: ...

class EvidenceHit(_message.Message):
    __slots__ = ("document_id", "chunk_id", "score", "new")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    NEW_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    chunk_id: str
    score: float
    new: bool
    def __init__(self, document_id: _Optional[str] = ..., chunk_id: _Optional[str] = ..., score: _Optional[float] = ..., new: _Optional[bool] = ...) -> None: ...

class EvidenceSentence(_message.Message):
    __slots__ = ("document_id", "text", "entailment", "contradiction")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ENTAILMENT_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTION_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    text: str
    entailment: float
    contradiction: float
    def __init__(self, document_id: _Optional[str] = ..., text: _Optional[str] = ..., entailment: _Optional[float] = ..., contradiction: _Optional[float] = ...) -> None: ...

class Belief(_message.Message):
    __slots__ = ("session_id", "turn", "entropy_bits", "normalized_uncertainty", "top_hypotheses", "unknown_mass", "homogeneity", "homogeneity_bucket", "stop_signals", "current_answer")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    ENTROPY_BITS_FIELD_NUMBER: _ClassVar[int]
    NORMALIZED_UNCERTAINTY_FIELD_NUMBER: _ClassVar[int]
    TOP_HYPOTHESES_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_MASS_FIELD_NUMBER: _ClassVar[int]
    HOMOGENEITY_FIELD_NUMBER: _ClassVar[int]
    HOMOGENEITY_BUCKET_FIELD_NUMBER: _ClassVar[int]
    STOP_SIGNALS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ANSWER_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    turn: int
    entropy_bits: float
    normalized_uncertainty: float
    top_hypotheses: _containers.RepeatedCompositeFieldContainer[ScoredHypothesis]
    unknown_mass: float
    homogeneity: Homogeneity
    homogeneity_bucket: str
    stop_signals: _containers.RepeatedCompositeFieldContainer[StopSignal]
    current_answer: str
    def __init__(self, session_id: _Optional[str] = ..., turn: _Optional[int] = ..., entropy_bits: _Optional[float] = ..., normalized_uncertainty: _Optional[float] = ..., top_hypotheses: _Optional[_Iterable[_Union[ScoredHypothesis, _Mapping]]] = ..., unknown_mass: _Optional[float] = ..., homogeneity: _Optional[_Union[Homogeneity, _Mapping]] = ..., homogeneity_bucket: _Optional[str] = ..., stop_signals: _Optional[_Iterable[_Union[StopSignal, _Mapping]]] = ..., current_answer: _Optional[str] = ...) -> None: ...

class Homogeneity(_message.Message):
    __slots__ = ("p_max", "mean_pairwise_similarity", "effective_rank", "exact_repetition_rate", "trigram_jaccard", "prompt_sensitivity", "simulator_surprise", "simulator_overlap")
    P_MAX_FIELD_NUMBER: _ClassVar[int]
    MEAN_PAIRWISE_SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_RANK_FIELD_NUMBER: _ClassVar[int]
    EXACT_REPETITION_RATE_FIELD_NUMBER: _ClassVar[int]
    TRIGRAM_JACCARD_FIELD_NUMBER: _ClassVar[int]
    PROMPT_SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    SIMULATOR_SURPRISE_FIELD_NUMBER: _ClassVar[int]
    SIMULATOR_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    p_max: float
    mean_pairwise_similarity: float
    effective_rank: float
    exact_repetition_rate: float
    trigram_jaccard: float
    prompt_sensitivity: float
    simulator_surprise: float
    simulator_overlap: bool
    def __init__(self, p_max: _Optional[float] = ..., mean_pairwise_similarity: _Optional[float] = ..., effective_rank: _Optional[float] = ..., exact_repetition_rate: _Optional[float] = ..., trigram_jaccard: _Optional[float] = ..., prompt_sensitivity: _Optional[float] = ..., simulator_surprise: _Optional[float] = ..., simulator_overlap: _Optional[bool] = ...) -> None: ...

class StopSignal(_message.Message):
    __slots__ = ("rule", "score", "threshold", "answers", "calibration_version", "answer")
    RULE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    CALIBRATION_VERSION_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    rule: str
    score: float
    threshold: float
    answers: bool
    calibration_version: int
    answer: str
    def __init__(self, rule: _Optional[str] = ..., score: _Optional[float] = ..., threshold: _Optional[float] = ..., answers: _Optional[bool] = ..., calibration_version: _Optional[int] = ..., answer: _Optional[str] = ...) -> None: ...

class ScoredHypothesis(_message.Message):
    __slots__ = ("id", "description", "probability")
    ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    id: str
    description: str
    probability: float
    def __init__(self, id: _Optional[str] = ..., description: _Optional[str] = ..., probability: _Optional[float] = ...) -> None: ...

class Ask(_message.Message):
    __slots__ = ("session_id", "turn", "question_id", "question", "expected_information_gain", "cost", "cost_adjusted_score", "exploration_bonus", "rationale", "runners_up")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    QUESTION_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_INFORMATION_GAIN_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    COST_ADJUSTED_SCORE_FIELD_NUMBER: _ClassVar[int]
    EXPLORATION_BONUS_FIELD_NUMBER: _ClassVar[int]
    RATIONALE_FIELD_NUMBER: _ClassVar[int]
    RUNNERS_UP_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    turn: int
    question_id: str
    question: str
    expected_information_gain: float
    cost: float
    cost_adjusted_score: float
    exploration_bonus: float
    rationale: str
    runners_up: _containers.RepeatedCompositeFieldContainer[ScoredQuestion]
    def __init__(self, session_id: _Optional[str] = ..., turn: _Optional[int] = ..., question_id: _Optional[str] = ..., question: _Optional[str] = ..., expected_information_gain: _Optional[float] = ..., cost: _Optional[float] = ..., cost_adjusted_score: _Optional[float] = ..., exploration_bonus: _Optional[float] = ..., rationale: _Optional[str] = ..., runners_up: _Optional[_Iterable[_Union[ScoredQuestion, _Mapping]]] = ...) -> None: ...

class ScoredQuestion(_message.Message):
    __slots__ = ("question_id", "question", "expected_information_gain", "cost_adjusted_score")
    QUESTION_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_INFORMATION_GAIN_FIELD_NUMBER: _ClassVar[int]
    COST_ADJUSTED_SCORE_FIELD_NUMBER: _ClassVar[int]
    question_id: str
    question: str
    expected_information_gain: float
    cost_adjusted_score: float
    def __init__(self, question_id: _Optional[str] = ..., question: _Optional[str] = ..., expected_information_gain: _Optional[float] = ..., cost_adjusted_score: _Optional[float] = ...) -> None: ...

class InquiryAnswer(_message.Message):
    __slots__ = ("session_id", "answer", "confidence", "stopping_reason", "forced", "trace")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    STOPPING_REASON_FIELD_NUMBER: _ClassVar[int]
    FORCED_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    answer: str
    confidence: _common_pb2.Confidence
    stopping_reason: StoppingReason
    forced: bool
    trace: InquiryTrace
    def __init__(self, session_id: _Optional[str] = ..., answer: _Optional[str] = ..., confidence: _Optional[_Union[_common_pb2.Confidence, _Mapping]] = ..., stopping_reason: _Optional[_Union[StoppingReason, str]] = ..., forced: _Optional[bool] = ..., trace: _Optional[_Union[InquiryTrace, _Mapping]] = ...) -> None: ...

class InquiryTrace(_message.Message):
    __slots__ = ("entropy_bits", "predicted_gain", "actual_gain")
    ENTROPY_BITS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_GAIN_FIELD_NUMBER: _ClassVar[int]
    ACTUAL_GAIN_FIELD_NUMBER: _ClassVar[int]
    entropy_bits: _containers.RepeatedScalarFieldContainer[float]
    predicted_gain: _containers.RepeatedScalarFieldContainer[float]
    actual_gain: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, entropy_bits: _Optional[_Iterable[float]] = ..., predicted_gain: _Optional[_Iterable[float]] = ..., actual_gain: _Optional[_Iterable[float]] = ...) -> None: ...

class ObserveRequest(_message.Message):
    __slots__ = ("retrieval_outcome", "inquiry_outcome", "tool_use", "batch")
    RETRIEVAL_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    INQUIRY_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    retrieval_outcome: RetrievalOutcome
    inquiry_outcome: InquiryOutcome
    tool_use: ToolUseEvent
    batch: ObservationBatch
    def __init__(self, retrieval_outcome: _Optional[_Union[RetrievalOutcome, _Mapping]] = ..., inquiry_outcome: _Optional[_Union[InquiryOutcome, _Mapping]] = ..., tool_use: _Optional[_Union[ToolUseEvent, _Mapping]] = ..., batch: _Optional[_Union[ObservationBatch, _Mapping]] = ...) -> None: ...

class ObservationBatch(_message.Message):
    __slots__ = ("observations",)
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    observations: _containers.RepeatedCompositeFieldContainer[Observation]
    def __init__(self, observations: _Optional[_Iterable[_Union[Observation, _Mapping]]] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ("retrieval_outcome", "inquiry_outcome", "tool_use")
    RETRIEVAL_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    INQUIRY_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    retrieval_outcome: RetrievalOutcome
    inquiry_outcome: InquiryOutcome
    tool_use: ToolUseEvent
    def __init__(self, retrieval_outcome: _Optional[_Union[RetrievalOutcome, _Mapping]] = ..., inquiry_outcome: _Optional[_Union[InquiryOutcome, _Mapping]] = ..., tool_use: _Optional[_Union[ToolUseEvent, _Mapping]] = ...) -> None: ...

class RetrievalOutcome(_message.Message):
    __slots__ = ("retrieval_id", "used_document_ids", "feedback", "agent_success", "found_missing_content", "missed_document_ids")
    RETRIEVAL_ID_FIELD_NUMBER: _ClassVar[int]
    USED_DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    AGENT_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    FOUND_MISSING_CONTENT_FIELD_NUMBER: _ClassVar[int]
    MISSED_DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    retrieval_id: str
    used_document_ids: _containers.RepeatedScalarFieldContainer[str]
    feedback: Feedback
    agent_success: bool
    found_missing_content: bool
    missed_document_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, retrieval_id: _Optional[str] = ..., used_document_ids: _Optional[_Iterable[str]] = ..., feedback: _Optional[_Union[Feedback, str]] = ..., agent_success: _Optional[bool] = ..., found_missing_content: _Optional[bool] = ..., missed_document_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class InquiryOutcome(_message.Message):
    __slots__ = ("session_id", "ground_truth", "correct")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    GROUND_TRUTH_FIELD_NUMBER: _ClassVar[int]
    CORRECT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    ground_truth: str
    correct: bool
    def __init__(self, session_id: _Optional[str] = ..., ground_truth: _Optional[str] = ..., correct: _Optional[bool] = ...) -> None: ...

class ToolUseEvent(_message.Message):
    __slots__ = ("request", "used_tool", "offered_tools", "toolset", "success")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    USED_TOOL_FIELD_NUMBER: _ClassVar[int]
    OFFERED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOLSET_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    request: str
    used_tool: str
    offered_tools: _containers.RepeatedScalarFieldContainer[str]
    toolset: str
    success: bool
    def __init__(self, request: _Optional[str] = ..., used_tool: _Optional[str] = ..., offered_tools: _Optional[_Iterable[str]] = ..., toolset: _Optional[str] = ..., success: _Optional[bool] = ...) -> None: ...

class ObserveResponse(_message.Message):
    __slots__ = ("recorded", "rejected")
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    recorded: int
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedObservation]
    def __init__(self, recorded: _Optional[int] = ..., rejected: _Optional[_Iterable[_Union[RejectedObservation, _Mapping]]] = ...) -> None: ...

class RejectedObservation(_message.Message):
    __slots__ = ("index", "code", "message")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    index: int
    code: str
    message: str
    def __init__(self, index: _Optional[int] = ..., code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class CalibrateRequest(_message.Message):
    __slots__ = ("target", "collection", "task", "regime", "bucket", "risk", "alpha", "stop_rule", "states", "one_state_per_session", "threshold_rule")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    REGIME_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    RISK_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    STOP_RULE_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    ONE_STATE_PER_SESSION_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_RULE_FIELD_NUMBER: _ClassVar[int]
    target: CalibrationTarget
    collection: str
    task: str
    regime: str
    bucket: str
    risk: float
    alpha: float
    stop_rule: str
    states: _containers.RepeatedCompositeFieldContainer[CalibrationState]
    one_state_per_session: bool
    threshold_rule: str
    def __init__(self, target: _Optional[_Union[CalibrationTarget, str]] = ..., collection: _Optional[str] = ..., task: _Optional[str] = ..., regime: _Optional[str] = ..., bucket: _Optional[str] = ..., risk: _Optional[float] = ..., alpha: _Optional[float] = ..., stop_rule: _Optional[str] = ..., states: _Optional[_Iterable[_Union[CalibrationState, _Mapping]]] = ..., one_state_per_session: _Optional[bool] = ..., threshold_rule: _Optional[str] = ...) -> None: ...

class CalibrationState(_message.Message):
    __slots__ = ("score", "error", "stated_confidence")
    SCORE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATED_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    score: float
    error: bool
    stated_confidence: float
    def __init__(self, score: _Optional[float] = ..., error: _Optional[bool] = ..., stated_confidence: _Optional[float] = ...) -> None: ...

class CalibrateResponse(_message.Message):
    __slots__ = ("progress", "report")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    progress: CalibrationProgress
    report: CalibrationReport
    def __init__(self, progress: _Optional[_Union[CalibrationProgress, _Mapping]] = ..., report: _Optional[_Union[CalibrationReport, _Mapping]] = ...) -> None: ...

class CalibrationProgress(_message.Message):
    __slots__ = ("stage", "fraction")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    FRACTION_FIELD_NUMBER: _ClassVar[int]
    stage: str
    fraction: float
    def __init__(self, stage: _Optional[str] = ..., fraction: _Optional[float] = ...) -> None: ...

class CalibrationReport(_message.Message):
    __slots__ = ("target", "version", "sample_size", "deployed", "summary", "diagnostics", "plot_png", "curves")
    class DiagnosticsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    TARGET_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_SIZE_FIELD_NUMBER: _ClassVar[int]
    DEPLOYED_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    PLOT_PNG_FIELD_NUMBER: _ClassVar[int]
    CURVES_FIELD_NUMBER: _ClassVar[int]
    target: CalibrationTarget
    version: str
    sample_size: int
    deployed: bool
    summary: str
    diagnostics: _containers.ScalarMap[str, float]
    plot_png: bytes
    curves: _containers.RepeatedCompositeFieldContainer[CalibrationCurve]
    def __init__(self, target: _Optional[_Union[CalibrationTarget, str]] = ..., version: _Optional[str] = ..., sample_size: _Optional[int] = ..., deployed: _Optional[bool] = ..., summary: _Optional[str] = ..., diagnostics: _Optional[_Mapping[str, float]] = ..., plot_png: _Optional[bytes] = ..., curves: _Optional[_Iterable[_Union[CalibrationCurve, _Mapping]]] = ...) -> None: ...

class CalibrationCurve(_message.Message):
    __slots__ = ("name", "x_label", "y_label", "x", "y")
    NAME_FIELD_NUMBER: _ClassVar[int]
    X_LABEL_FIELD_NUMBER: _ClassVar[int]
    Y_LABEL_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    name: str
    x_label: str
    y_label: str
    x: _containers.RepeatedScalarFieldContainer[float]
    y: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, name: _Optional[str] = ..., x_label: _Optional[str] = ..., y_label: _Optional[str] = ..., x: _Optional[_Iterable[float]] = ..., y: _Optional[_Iterable[float]] = ...) -> None: ...

class GetStrategyMetricsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStrategyMetricsResponse(_message.Message):
    __slots__ = ("arms", "selection_entropy_bits", "cumulative_regret", "planned_retrievals", "observations", "pruned_arms", "selector_version", "corpus_inquiry")
    ARMS_FIELD_NUMBER: _ClassVar[int]
    SELECTION_ENTROPY_BITS_FIELD_NUMBER: _ClassVar[int]
    CUMULATIVE_REGRET_FIELD_NUMBER: _ClassVar[int]
    PLANNED_RETRIEVALS_FIELD_NUMBER: _ClassVar[int]
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    PRUNED_ARMS_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    CORPUS_INQUIRY_FIELD_NUMBER: _ClassVar[int]
    arms: _containers.RepeatedCompositeFieldContainer[ArmMetrics]
    selection_entropy_bits: float
    cumulative_regret: float
    planned_retrievals: int
    observations: int
    pruned_arms: _containers.RepeatedScalarFieldContainer[str]
    selector_version: int
    corpus_inquiry: CorpusInquiryMetrics
    def __init__(self, arms: _Optional[_Iterable[_Union[ArmMetrics, _Mapping]]] = ..., selection_entropy_bits: _Optional[float] = ..., cumulative_regret: _Optional[float] = ..., planned_retrievals: _Optional[int] = ..., observations: _Optional[int] = ..., pruned_arms: _Optional[_Iterable[str]] = ..., selector_version: _Optional[int] = ..., corpus_inquiry: _Optional[_Union[CorpusInquiryMetrics, _Mapping]] = ...) -> None: ...

class CorpusInquiryMetrics(_message.Message):
    __slots__ = ("queries", "observed_sessions", "information_gain_mae", "information_gain_mae_last_10", "information_gain_mae_last_100", "reach_mae", "reach_accuracy", "cost_mae_ms", "strategies")
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    INFORMATION_GAIN_MAE_FIELD_NUMBER: _ClassVar[int]
    INFORMATION_GAIN_MAE_LAST_10_FIELD_NUMBER: _ClassVar[int]
    INFORMATION_GAIN_MAE_LAST_100_FIELD_NUMBER: _ClassVar[int]
    REACH_MAE_FIELD_NUMBER: _ClassVar[int]
    REACH_ACCURACY_FIELD_NUMBER: _ClassVar[int]
    COST_MAE_MS_FIELD_NUMBER: _ClassVar[int]
    STRATEGIES_FIELD_NUMBER: _ClassVar[int]
    queries: int
    observed_sessions: int
    information_gain_mae: float
    information_gain_mae_last_10: float
    information_gain_mae_last_100: float
    reach_mae: float
    reach_accuracy: float
    cost_mae_ms: float
    strategies: _containers.RepeatedCompositeFieldContainer[StrategyGain]
    def __init__(self, queries: _Optional[int] = ..., observed_sessions: _Optional[int] = ..., information_gain_mae: _Optional[float] = ..., information_gain_mae_last_10: _Optional[float] = ..., information_gain_mae_last_100: _Optional[float] = ..., reach_mae: _Optional[float] = ..., reach_accuracy: _Optional[float] = ..., cost_mae_ms: _Optional[float] = ..., strategies: _Optional[_Iterable[_Union[StrategyGain, _Mapping]]] = ...) -> None: ...

class StrategyGain(_message.Message):
    __slots__ = ("strategy", "queries", "mean_information_gain")
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    MEAN_INFORMATION_GAIN_FIELD_NUMBER: _ClassVar[int]
    strategy: str
    queries: int
    mean_information_gain: float
    def __init__(self, strategy: _Optional[str] = ..., queries: _Optional[int] = ..., mean_information_gain: _Optional[float] = ...) -> None: ...

class ArmMetrics(_message.Message):
    __slots__ = ("arm", "selection_rate", "contribution_rate", "mean_latency_ms", "mean_reward", "exploration_share", "runs", "observed_runs", "mean_cost_ms")
    ARM_FIELD_NUMBER: _ClassVar[int]
    SELECTION_RATE_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTION_RATE_FIELD_NUMBER: _ClassVar[int]
    MEAN_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    MEAN_REWARD_FIELD_NUMBER: _ClassVar[int]
    EXPLORATION_SHARE_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_RUNS_FIELD_NUMBER: _ClassVar[int]
    MEAN_COST_MS_FIELD_NUMBER: _ClassVar[int]
    arm: str
    selection_rate: float
    contribution_rate: float
    mean_latency_ms: float
    mean_reward: float
    exploration_share: float
    runs: int
    observed_runs: int
    mean_cost_ms: float
    def __init__(self, arm: _Optional[str] = ..., selection_rate: _Optional[float] = ..., contribution_rate: _Optional[float] = ..., mean_latency_ms: _Optional[float] = ..., mean_reward: _Optional[float] = ..., exploration_share: _Optional[float] = ..., runs: _Optional[int] = ..., observed_runs: _Optional[int] = ..., mean_cost_ms: _Optional[float] = ...) -> None: ...
