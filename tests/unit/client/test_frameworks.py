"""The framework retrievers' shared pieces: a hit's metadata and the outcome built from the
documents an agent used (issue 50, item 2)."""

import pytest
from sounding_client import types as t
from sounding_client.frameworks._hits import DOCUMENT_ID, RETRIEVAL_ID, hit_metadata, outcome

pytestmark = pytest.mark.unit


def confidence(value):
    return t.Confidence(kind="derived" if value is not None else "absent", value=value)


FINAL = t.Final(
    retrieval_id="r1",
    hits=[t.Hit("d1", "d1#0", 0.5, "text", "Title", [t.ArmRank("dense", 1, 0.9)], {"lang": "en"})],
    uncertainty=t.Uncertainty(
        confidence(0.2), confidence(0.7), confidence(None), confidence(0.4), confidence(0.9)
    ),
    confidence=confidence(0.8),
    latency_ms=3.0,
)


def test_a_hit_carries_its_ids_score_arm_ranks_and_the_retrievals_uncertainty():
    metadata = hit_metadata(FINAL, FINAL.hits[0])
    assert metadata["lang"] == "en" and metadata[RETRIEVAL_ID] == "r1" and metadata[DOCUMENT_ID] == "d1"
    assert metadata["sounding_score"] == 0.5 and metadata["sounding_arm_ranks"] == {"dense": 1}
    assert metadata["sounding_miss_rate"] == 0.2 and metadata["sounding_estimated_recall"] is None


def test_the_outcome_names_the_retrieval_and_each_used_document_once():
    used = [{RETRIEVAL_ID: "r1", DOCUMENT_ID: "d1"}, {RETRIEVAL_ID: "r1", DOCUMENT_ID: "d1"}]
    reported = outcome(used, None, ["d9"], True, "helpful", False)
    assert reported == t.RetrievalOutcome("r1", ("d1",), "helpful", True, False, ("d9",))
    assert outcome([], "r2", (), False, "", True).retrieval_id == "r2"


@pytest.mark.parametrize(
    "used, retrieval_id, message",
    [
        ([], None, "pass retrieval_id"),
        ([{DOCUMENT_ID: "d1"}], None, "no retrieval id"),
        ([{RETRIEVAL_ID: "r1", DOCUMENT_ID: "d1"}, {RETRIEVAL_ID: "r2", DOCUMENT_ID: "d2"}], None, "not 2"),
        ([{RETRIEVAL_ID: "r1", DOCUMENT_ID: "d1"}], "r2", "not 2"),
    ],
)
def test_an_outcome_of_no_or_several_retrievals_is_refused(used, retrieval_id, message):
    with pytest.raises(ValueError, match=message):
        outcome(used, retrieval_id, (), None, "", False)
