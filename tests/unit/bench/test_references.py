"""LanceDB's hybrid search as the evaluation's in-process peer, on a real LanceDB directory."""

import numpy as np
import pytest
from sounding_bench.references import LanceHybrid

pytestmark = pytest.mark.unit

IDS = ["cat", "dog", "ship", "lead"]
TEXTS = ["the cat sat on the mat", "dogs chase cats", "ships sound the depth", "a lead line sounds the depth"]
VECTORS = np.eye(4, dtype=np.float32)


def test_hybrid_fuses_the_vector_and_full_text_rankings(tmp_path):
    reference = LanceHybrid.build(tmp_path / "ref", IDS, TEXTS, VECTORS)
    # The vector points at "ship"; the text matches "lead" and "ship" ("depth"): RRF puts the
    # row both rankings share first.
    ranked = reference.search("depth lead", VECTORS[2], limit=3)
    assert ranked[0] == "ship" and set(ranked[:2]) == {"ship", "lead"}
    assert len(reference.search("cat", VECTORS[0], limit=2)) == 2


def test_a_built_table_is_reused_for_the_same_corpus_and_rebuilt_for_another(tmp_path):
    LanceHybrid.build(tmp_path / "ref", IDS, TEXTS, VECTORS)
    again = LanceHybrid.build(tmp_path / "ref", IDS, TEXTS, VECTORS)
    assert again.search("cat", VECTORS[0], limit=1) == ["cat"]
    smaller = LanceHybrid.build(tmp_path / "ref", IDS[:2], TEXTS[:2], VECTORS[:2, :])
    assert set(smaller.search("depth", VECTORS[0], limit=4)) == {"cat", "dog"}
