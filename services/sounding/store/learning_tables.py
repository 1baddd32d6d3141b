"""The learning log's tables (`learning.LearningLog`): their names and Arrow schemas."""

from __future__ import annotations

import pyarrow as pa

RETRIEVALS_TABLE = "retrievals"
OBSERVATIONS_TABLE = "retrieval_observations"
DEPLOYMENTS_TABLE = "selector_deployments"

ARM_RUN = pa.struct(
    [
        ("arm", pa.string()),
        ("document_ids", pa.list_(pa.string())),
        ("latency_ms", pa.float64()),
        ("cost_ms", pa.float64()),
        ("exploration", pa.bool_()),
    ]
)
# An arm's scores of the documents it returned, in rank order (what score-aware fusion reads).
ARM_SCORES = pa.struct([("arm", pa.string()), ("scores", pa.list_(pa.float64()))])
# A step of the expansion loop: its strategy, the documents it brought into the result, its latency.
EXPANSION_STEP = pa.struct(
    [
        ("strategy", pa.string()),
        ("added_document_ids", pa.list_(pa.string())),
        ("latency_ms", pa.float64()),
    ]
)
# An outcome as the caller sent it.
OUTCOME = pa.struct(
    [
        ("used_document_ids", pa.list_(pa.string())),
        ("feedback", pa.string()),
        ("agent_success", pa.bool_()),
        ("found_missing_content", pa.bool_()),
        ("missed_document_ids", pa.list_(pa.string())),
    ]
)

RETRIEVALS_SCHEMA = pa.schema(
    [
        ("retrieval_id", pa.string()),
        ("collection", pa.string()),
        # The selector's query counter when it planned this retrieval; -1 for requested arms.
        ("query_index", pa.int64()),
        ("mode", pa.string()),
        ("context", pa.list_(pa.float64())),
        ("embedding", pa.list_(pa.float32())),
        # The arms that ran, each with the documents it returned (in rank order).
        ("arms", pa.list_(ARM_RUN)),
        ("create_time_us", pa.int64()),
        # The miss rate the retrieval stated, before any calibration (what Calibrate fits).
        ("stated_miss_rate", pa.float64()),
        # The conservative confidence it stated, synthesis × (1 − miss rate), before any
        # calibration; null when the request gave no synthesis confidence.
        ("stated_confidence", pa.float64()),
        # The expansion loop's steps, in order (null in rows logged before they were kept).
        ("expansions", pa.list_(EXPANSION_STEP)),
        # Each arm's scores, beside `arms` (null in rows logged before they were kept).
        ("arm_scores", pa.list_(ARM_SCORES)),
        # How its arms' rankings were fused (`core.fusion`: "min_max", "rrf"; null in rows
        # logged before it was kept, which were fused by RRF).
        ("fusion", pa.string()),
    ]
)

# One row per fitted calibration (miss rate, stop thresholds, …); the latest per target is in use.
CALIBRATIONS_TABLE = "calibrations"
CALIBRATIONS_SCHEMA = pa.schema(
    [
        ("target", pa.string()),
        ("version", pa.int64()),
        ("params_json", pa.string()),
        ("report_json", pa.string()),
        ("create_time_us", pa.int64()),
    ]
)

# One row per assessed state of an llm inquiry whose outcome was observed (robust-MI spec §2.5.2):
# what the stop rules read there and whether the answer of that state was wrong.
INQUIRY_STATES_TABLE = "inquiry_states"
INQUIRY_STATES_SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("task", pa.string()),
        ("regime", pa.string()),
        ("bucket", pa.string()),
        ("turn", pa.int64()),
        # {rule: score} for the rules the state was scored for.
        ("scores", pa.map_(pa.string(), pa.float64())),
        ("error", pa.bool_()),
        # 1 - the sampled probability of the true answer (split-conformal calibration).
        ("nonconformity", pa.float64()),
        # The stated confidence in [0, 1], when the verbalized rule was scored.
        ("stated_confidence", pa.float64()),
        ("create_time_us", pa.int64()),
    ]
)

OBSERVATIONS_SCHEMA = pa.schema(
    [
        ("sequence", pa.int64()),
        ("retrieval_id", pa.string()),
        ("outcome", OUTCOME),
        # {arm: reward} for every arm that ran.
        ("rewards", pa.map_(pa.string(), pa.float64())),
        ("create_time_us", pa.int64()),
        # {plan: reward} for every plan of the arms that ran, as the selector learned it (null in
        # rows logged before plans were kept: those are computed again from the retrieval).
        ("plan_rewards", pa.map_(pa.string(), pa.float64())),
    ]
)


# One row per recalibration that was deployed (adaptive-strategy spec §6.3–§6.4); the latest wins.
DEPLOYMENTS_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        # The selector learns from observations made at or after this time.
        ("window_start_us", pa.int64()),
        ("pruned_arms", pa.list_(pa.string())),
        # The recalibration's report: a free-form document.
        ("report_json", pa.string()),
        ("create_time_us", pa.int64()),
    ]
)
