import pytest
from sounding.retrieval.strategies import STRATEGIES, parse_variations

pytestmark = pytest.mark.unit


def test_variations_lose_list_markers_quotes_repeats_and_the_query():
    text = (
        '1. How deep is the sea?\n2) "Ocean depth measurement"\n'
        "- how deep is the sea?\n\n* What is sonar\n4. extra"
    )
    assert parse_variations(text, "How deep is the sea?", 3) == [
        "Ocean depth measurement",
        "What is sonar",
        "extra",
    ]


def test_every_arm_of_the_spec_is_registered():
    assert set(STRATEGIES) >= {"dense", "lexical", "hyde", "query2doc", "multi_query"}
