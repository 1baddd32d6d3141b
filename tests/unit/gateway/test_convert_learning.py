import pytest
from sounding.gateway.convert.learning import calibrate_response, observations
from sounding.learning.inquiry import InquiryOutcome
from sounding.learning.protocol import CALIBRATION_TARGETS, CalibrationReport, Rejected, RetrievalOutcome
from sounding.settings.limits import ObserveLimits
from sounding.tools.protocol import ToolUse
from sounding_api.sounding.v1 import sounding_pb2

pytestmark = pytest.mark.unit


def test_every_calibration_target_has_its_report_converted():
    converted = {
        calibrate_response(CalibrationReport(target, 1, 50, True, "", {})).report.target
        for target in CALIBRATION_TARGETS
    }
    assert sounding_pb2.CALIBRATION_TARGET_CONFIDENCE in converted
    assert len(converted) == len(CALIBRATION_TARGETS)


def _outcome(**fields) -> sounding_pb2.Observation:
    return sounding_pb2.Observation(retrieval_outcome=sounding_pb2.RetrievalOutcome(**fields))


@pytest.mark.parametrize(
    ("limits", "fields", "field"),
    [
        (ObserveLimits(max_document_ids=2), {"used_document_ids": ["a", "b", "c"]}, "used_document_ids"),
        (ObserveLimits(max_document_ids=2), {"missed_document_ids": ["a", "b", "c"]}, "missed_document_ids"),
        (ObserveLimits(max_id_chars=8), {"used_document_ids": ["d" * 9]}, "used_document_ids"),
        (ObserveLimits(), {"used_document_ids": ["d" * 513]}, "used_document_ids"),
        (ObserveLimits(), {"missed_document_ids": ["d"] * 1001}, "missed_document_ids"),
        (ObserveLimits(max_id_chars=8), {"retrieval_id": "r" * 9}, "retrieval_id"),
    ],
)
def test_an_outcome_over_a_limit_is_rejected_naming_its_field(limits, fields, field):
    fields.setdefault("retrieval_id", "r")
    request = sounding_pb2.ObserveRequest(
        batch=sounding_pb2.ObservationBatch(observations=[_outcome(retrieval_id="ok"), _outcome(**fields)])
    )
    accepted, rejected = observations(request, 10, limits)
    assert isinstance(accepted, RetrievalOutcome) and accepted.retrieval_id == "ok"
    assert isinstance(rejected, Rejected) and rejected.index == 11 and rejected.code == "INVALID_ARGUMENT"
    assert f"retrieval_outcome.{field}" in rejected.message


def test_outcomes_at_the_limits_are_converted_field_for_field():
    limits = ObserveLimits(max_document_ids=2, max_id_chars=8)
    message = _outcome(
        retrieval_id="r" * 8,
        used_document_ids=["u" * 8, "v"],
        missed_document_ids=["m"],
        feedback=sounding_pb2.FEEDBACK_NOT_HELPFUL,
        agent_success=False,
        found_missing_content=True,
    )
    (converted,) = observations(
        sounding_pb2.ObserveRequest(retrieval_outcome=message.retrieval_outcome), 0, limits
    )
    assert converted == RetrievalOutcome(
        retrieval_id="r" * 8,
        used_document_ids=("u" * 8, "v"),
        feedback="not_helpful",
        agent_success=False,
        found_missing_content=True,
        missed_document_ids=("m",),
    )
    (unset,) = observations(sounding_pb2.ObserveRequest(retrieval_outcome={"retrieval_id": "r"}), 0, limits)
    assert unset.agent_success is None and unset.feedback == ""


def test_other_kinds_and_empty_observations_in_a_batch():
    request = sounding_pb2.ObserveRequest(
        batch=sounding_pb2.ObservationBatch(
            observations=[
                sounding_pb2.Observation(tool_use=sounding_pb2.ToolUseEvent(toolset="t", used_tool="x")),
                sounding_pb2.Observation(),
                sounding_pb2.Observation(inquiry_outcome=sounding_pb2.InquiryOutcome(session_id="s")),
            ]
        )
    )
    tool, empty, inquiry = observations(request, 0, ObserveLimits())
    assert isinstance(tool, ToolUse) and tool.used_tool == "x" and tool.success is None
    assert isinstance(empty, Rejected) and empty.index == 1
    assert isinstance(inquiry, InquiryOutcome) and inquiry.session_id == "s"
