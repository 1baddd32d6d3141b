import pytest
from sounding.core.entities import co_occurrences, extract_entities

pytestmark = pytest.mark.unit


def test_key_phrases_split_at_stop_words_and_punctuation():
    text = "Echo sounders measure water depth. The speed of sound in seawater depends on temperature."
    entities = extract_entities(text)
    assert "echo sounders measure" in entities and "water depth" in entities  # a run of five, cut
    assert "sound" in entities and "seawater depends" in entities
    assert all(e == e.lower() for e in entities)
    assert "the" not in entities and "of" not in " ".join(entities).split()


def test_identifiers_are_entities_and_nothing_repeats():
    entities = extract_entities("BRCA1 and IL-6 levels; BRCA1 again in p53-null mice", limit=2)
    assert {"brca1", "il-6"} <= set(entities)
    assert len(entities) == len(set(entities))


def test_deterministic():
    text = "Reciprocal rank fusion combines rankings from lexical and dense retrieval."
    assert extract_entities(text) == extract_entities(text)


def test_co_occurrence_counts_pairs_once_per_list():
    counts = co_occurrences([["a", "b", "c"], ["b", "a"], ["c", "c"]])
    assert counts == {("a", "b"): 2, ("a", "c"): 1, ("b", "c"): 1}
