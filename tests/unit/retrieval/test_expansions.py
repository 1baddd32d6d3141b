import asyncio

import numpy as np
import pyarrow as pa
import pytest
from sounding.retrieval import expansions
from sounding.retrieval.protocol import ExpansionRequest
from sounding.store.graph import GraphSnapshot
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit

DIMENSION = 4


def unit(*values):
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


ENTITIES = {
    # name: (chunk count, vector)
    "tumour": (5, unit(1, 0.1, 0, 0)),
    "tumor": (9, unit(1, 0, 0, 0)),
    "cancer cells": (7, unit(0, 1, 0, 0)),
    "breast cancer cells": (2, unit(0, 1, 0.2, 0)),
    "cells": (20, unit(0, 0.8, 0, 0.6)),
    "growth": (6, unit(0, 0, 1, 0)),
    "apoptosis": (4, unit(0, 0.2, 0, 1)),
    "stem cells": (3, unit(0, 0.5, 0, 0.5)),
}
EDGES = [("tumor", "growth", 5), ("tumor", "apoptosis", 3), ("cancer cells", "growth", 2)]


@pytest.fixture
def graph():
    names = list(ENTITIES)
    entity_data = pa.table(
        {
            "entity": names,
            "chunk_count": [ENTITIES[n][0] for n in names],
            "vector": pa.array(
                [ENTITIES[n][1].tolist() for n in names], type=pa.list_(pa.float32(), DIMENSION)
            ),
        }
    )
    edge_data = pa.table(
        {
            "source": [e[0] for e in EDGES],
            "target": [e[1] for e in EDGES],
            "weight": [e[2] for e in EDGES],
        }
    )
    return GraphSnapshot._build((1, 1), entity_data, edge_data)


class FakeModels:
    def __init__(self, vectors=None, text=""):
        self.vectors, self.text, self.generated, self.scopes = vectors or {}, text, [], []

    async def embed(self, texts, timeout=None):
        return [self.vectors.get(t, unit(-1, -1, -1, -1)) for t in texts]  # by default: like nothing

    async def generate(self, messages, max_new_tokens=0, timeout=None, flow="", cache_scope=""):
        self.generated.append(messages)
        self.scopes.append(cache_scope)

        class Piece:
            text = self.text
            cached_decode_ms = 0.0

        yield Piece()


def expand(strategy, graph, query, models=None, vector=None, queries=3):
    request = ExpansionRequest(ResourceRef("default", "c"), query, strategy, queries, 10, None, vector)
    return asyncio.run(expansions.EXPANSIONS[strategy](request, graph, models or FakeModels()))


def test_graph_broader_and_narrower_follow_the_phrase_words(graph):
    assert graph.broader("breast cancer cells") == ["cancer cells", "cells"]
    assert graph.narrower("cells", 5) == ["cancer cells", "stem cells", "breast cancer cells"]
    assert graph.narrower("cancer cells", 5) == ["breast cancer cells"]
    assert graph.narrower("unknown", 5) == []


def test_graph_nearest_ranks_by_cosine_and_honours_the_floor(graph):
    assert [n for n, _ in graph.nearest(unit(1, 0, 0, 0), 2, 0.5)] == ["tumor", "tumour"]
    assert [n for n, _ in graph.nearest(unit(1, 0, 0, 0), 2, 0.5, frozenset({"tumor"}))] == ["tumour"]
    assert graph.nearest(unit(-1, 0, 0, 0), 2, 0.5) == []


def test_synonym_replaces_a_phrase_with_its_nearest_corpus_entity(graph):
    out = expand("synonym", graph, "tumour growth rate")
    assert [q.text for q in out] == ["tumor growth rate"]


def test_synonym_embeds_phrases_the_corpus_does_not_hold(graph):
    models = FakeModels({"neoplasm": unit(1, -0.05, 0, 0)})
    out = expand("synonym", graph, "neoplasm", models)
    assert [q.text for q in out] == ["tumor"]


def test_hypernym_shortens_multi_word_phrases_to_known_runs(graph):
    out = expand("hypernym", graph, "breast cancer cells and growth")
    assert [q.text for q in out] == ["cancer cells and growth"]
    assert expand("hypernym", graph, "growth") == []


def test_hyponym_appends_more_specific_corpus_entities(graph):
    out = expand("hyponym", graph, "what kills cells", queries=2)
    assert [q.text for q in out] == ["what kills cells cancer cells", "what kills cells stem cells"]


def test_related_concept_appends_graph_co_occurrences(graph):
    out = expand("related_concept", graph, "tumor", vector=unit(1, 0, 0, 0), queries=2)
    assert [q.text for q in out] == ["tumor growth", "tumor apoptosis"]


def test_code_pattern_respells_identifiers_without_the_graph(graph):
    out = expand("code_pattern", graph, "where is load_config", queries=2)
    assert [q.text for q in out] == ["where is loadConfig", "where is LoadConfig"]


def test_negative_sampling_moves_away_from_the_least_similar_co_occurring_concept(graph):
    query = unit(1, 0, 0.3, 0)
    (out,) = expand("negative_sampling", graph, "tumor", vector=query)
    assert out.text == "tumor NOT apoptosis"  # growth is closer to the query than apoptosis
    assert float(out.vector @ ENTITIES["apoptosis"][1]) < float(query @ ENTITIES["apoptosis"][1])
    assert np.linalg.norm(out.vector) == pytest.approx(1.0)


def test_reformulation_asks_the_generator_for_one_rewrite(graph):
    models = FakeModels(text="1. ocean depth measurement methods\n2. another")
    out = expand("reformulation", graph, "how deep is the sea", models)
    assert [q.text for q in out] == ["ocean depth measurement methods"]
    assert models.generated and models.generated[0][-1]["content"] == "how deep is the sea"


def test_generations_are_cached_within_the_tenant_that_owns_the_collection(graph):
    models = FakeModels(text="1. ocean depth")
    for collection in (ResourceRef("default", "charts"), ResourceRef("acme", "charts")):
        request = ExpansionRequest(collection, "how deep is the sea", "reformulation", 1, 10)
        asyncio.run(expansions.EXPANSIONS["reformulation"](request, graph, models))
    assert models.scopes == ["default", "acme"]
