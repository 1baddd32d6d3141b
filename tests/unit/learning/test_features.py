import numpy as np
import pytest
from sounding.learning import features

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "query,kind",
    [
        ("Who discovered penicillin?", "factoid"),
        ("How many genes does E. coli have", "factoid"),
        ("How do I rotate a LanceDB table's versions?", "procedural"),
        ("BM25 versus dense retrieval for short queries", "comparison"),
        ("What is reciprocal rank fusion?", "definition"),
        ("Is aspirin an anticoagulant?", "yes_no"),
        ("0-dimensional biomaterials show inductive properties.", "statement"),
    ],
)
def test_question_type(query, kind):
    assert features.question_type(query) == kind


def test_entity_like_tokens():
    assert features.entity_count("does parseConfig call load_settings in Ray 2.9") == 4
    assert features.entity_count("the cat sat") == 0


def test_layout_and_values():
    embedding = np.random.default_rng(1).standard_normal(384)
    vector = features.query_features(
        "What is it doing to BRCA1?", embedding, graph_entities=5, similar_outcomes=0.7
    )
    assert vector.shape == (features.DIMENSION,) == (len(features.FEATURE_NAMES),)
    named = dict(zip(features.FEATURE_NAMES, vector, strict=True))
    assert named["bias"] == 1.0
    assert named["ambiguous_refs"] == 1.0
    assert named["question_type.definition"] == 1.0
    assert sum(named[f"question_type.{k}"] for k in features.QUESTION_TYPES) == 1.0
    assert named["entity_count"] == 1 / 8
    assert named["graph_entities"] == 0.25 and named["similar_outcomes"] == 0.7
    projection = vector[11:19]
    # The projection depends only on the embedding's direction.
    again = features.query_features("What is it doing to BRCA1?", embedding * 3.0)
    assert np.allclose(again[11:19], projection)
    assert 0.2 < np.linalg.norm(projection) < 3.0
