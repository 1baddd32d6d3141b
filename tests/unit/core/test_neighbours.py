import numpy as np
import pytest
from sounding.core.neighbours import NearestValues

pytestmark = pytest.mark.unit


def test_nearest_values_match_a_full_sort_across_buffer_growth():
    rng = np.random.default_rng(3)
    embeddings, values = rng.normal(size=(200, 6)), rng.uniform(size=200)
    history = NearestValues()
    for count, (embedding, value) in enumerate(zip(embeddings, values, strict=True), start=1):
        history.add(embedding * rng.uniform(0.5, 3.0), value)  # the scale must not matter
        if count in (1, 5, 64, 65, 200):
            query = rng.normal(size=6)
            unit = embeddings[:count] / np.linalg.norm(embeddings[:count], axis=1, keepdims=True)
            expected = values[:count][np.argsort(-(unit @ query))[:5]]
            assert sorted(history.nearest(query, 5)) == pytest.approx(sorted(expected), rel=1e-6)
    assert len(history) == 200


def test_fewer_vectors_than_asked_give_all_values():
    history = NearestValues()
    assert len(history.nearest([1.0, 0.0], 3)) == 0
    history.add([1.0, 0.0], 0.25)
    history.add([0.0, 1.0], 0.75)
    assert sorted(history.nearest([1.0, 1.0], 3)) == [0.25, 0.75]


def test_at_capacity_the_oldest_give_way():
    history = NearestValues(capacity=100)
    rng = np.random.default_rng(5)
    embeddings = rng.normal(size=(250, 4))
    for index, embedding in enumerate(embeddings):
        history.add(embedding, float(index))
    assert len(history) == 100
    assert sorted(history.nearest(rng.normal(size=4), 1000)) == [float(i) for i in range(150, 250)]
    query = embeddings[10]  # gone: its nearest now comes from the last 100
    unit = embeddings[150:] / np.linalg.norm(embeddings[150:], axis=1, keepdims=True)
    assert history.nearest(query, 1)[0] == 150 + int(np.argmax(unit @ query))


@pytest.mark.parametrize("capacity,count", [(100, 37), (8, 37), (64, 64), (5, 3)])
def test_adding_many_at_once_equals_adding_them_one_at_a_time(capacity, count):
    rng = np.random.default_rng(capacity + count)
    first, second = NearestValues(capacity=capacity), NearestValues(capacity=capacity)
    for batch in (rng.normal(size=(4, 6)), rng.normal(size=(count, 6))):
        values = rng.random(len(batch))
        for row, value in zip(batch, values, strict=True):
            first.add(row, value)
        second.add_many(batch, values)
    assert len(first) == len(second) == min(4 + count, capacity)
    for probe in rng.normal(size=(5, 6)):
        for k in (1, 3, capacity):
            assert sorted(first.nearest(probe, k)) == sorted(second.nearest(probe, k))
