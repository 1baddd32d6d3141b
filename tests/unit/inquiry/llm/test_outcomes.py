import pytest
from sounding.inquiry.llm import outcomes

pytestmark = pytest.mark.unit


def test_errors_per_task():
    choices = ["Alice Archer", "Bruno Baker"]
    assert outcomes.is_correct("dc", "Bruno Baker", "Bruno Baker", choices)
    assert outcomes.is_correct("dc", "Bruno Baker", "Mr. Bruno Baker", choices)
    assert not outcomes.is_correct("dc", "Alice Archer", "Bruno Baker", choices)
    assert outcomes.is_correct("gn", "0435", "0435") and not outcomes.is_correct("gn", "0453", "0435")
    assert outcomes.is_correct("sp", "he was teleported by a device", "He was teleported by a device.")
    assert not outcomes.is_correct("sp", "", "anything")


def test_state_records_carry_scores_error_and_nonconformity():
    setup = {"task": "dc", "regime": "collapse", "choices": ["Alice Archer", "Bruno Baker"]}
    assessed = {
        "turn": 2,
        "scores": {"mi_only": 0.3},
        "answer": "Alice Archer",
        "bucket": "medium",
        "verbalized_confidence": None,
        "pairs": [{"initial": ["Alice Archer", "Bruno Baker", "Bruno Baker", "Bruno Baker"]}],
    }
    (record,) = outcomes.state_records("s1", setup, {"assessments": [assessed]}, "Bruno Baker")
    assert (record.turn, record.regime, record.bucket, record.error) == (2, "collapse", "medium", True)
    assert record.nonconformity == pytest.approx(0.25)
    assert record.scores == {"mi_only": 0.3}
