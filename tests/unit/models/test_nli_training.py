"""Sounding's NLI training on a tiny budget: a fixed number of steps from a seeded order gives the
same weights every time, and an interrupted training resumes from its checkpoint to the weights
an uninterrupted one reaches."""

import json

import numpy as np
import pytest
from sounding.models import nli

# The [models] extra: absent where the unit tests run without it (make test-newer-python).
pytest.importorskip("torch")
load_file = pytest.importorskip("safetensors.numpy").load_file

pytestmark = pytest.mark.unit

PAIRS = [
    nli.Pair("A dog runs in the park.", "An animal is outside.", "entailment"),
    nli.Pair("A dog runs in the park.", "A cat sleeps indoors.", "contradiction"),
    nli.Pair("A woman reads a book.", "She is reading a novel.", "neutral"),
    nli.Pair("Two men play chess.", "People are playing a game.", "entailment"),
    nli.Pair("Two men play chess.", "Nobody is playing.", "contradiction"),
    nli.Pair("A child eats an apple.", "The child is hungry.", "neutral"),
]


def weights(path):
    return load_file(str(path / "model.safetensors"))


def test_batches_cover_each_epoch_once_in_an_order_drawn_from_the_seed():
    epoch = np.concatenate([nli.batch_indices(6, 4, seed=3, step=s) for s in (0, 1)])
    assert sorted(epoch) == list(range(6))
    assert np.array_equal(nli.batch_indices(6, 4, 3, 2), nli.batch_indices(6, 4, 3, 2))
    orders = {tuple(np.concatenate([nli.batch_indices(6, 4, seed, s) for s in (0, 1)])) for seed in range(5)}
    assert len(orders) > 1
    assert nli.steps_for(9831, 3) == 924


def test_the_same_steps_and_seed_give_the_same_weights_and_an_interrupted_training_resumes(tmp_path):
    first = nli.train(PAIRS, tmp_path / "first", steps=4, batch_size=4, seed=7, checkpoint_every=2)
    second = nli.train(PAIRS, tmp_path / "second", steps=4, batch_size=4, seed=7, checkpoint_every=2)
    a, b = weights(first.path), weights(second.path)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert json.loads((first.path / nli.RECIPE_FILE).read_text())["steps"] == 4
    assert nli.trained_steps(first.path) == 4 and not nli.checkpoint_path(first.path).exists()

    class Interrupted(Exception):
        pass

    def stop_at_three(step, total, loss):
        if step == 3:
            raise Interrupted

    out = tmp_path / "resumed"
    with pytest.raises(Interrupted):
        nli.train(PAIRS, out, steps=4, batch_size=4, seed=7, on_step=stop_at_three, checkpoint_every=2)
    assert not out.exists() and (nli.checkpoint_path(out) / "state.pt").exists()
    resumed = nli.train(PAIRS, out, steps=4, batch_size=4, seed=7, checkpoint_every=2)
    assert (resumed.resumed_from, resumed.steps) == (2, 4)
    c = weights(resumed.path)
    assert all(np.array_equal(a[k], c[k]) for k in a)

    # A checkpoint of another recipe is not resumed: training starts over.
    with pytest.raises(Interrupted):
        nli.train(PAIRS, out, steps=4, batch_size=4, seed=7, on_step=stop_at_three, checkpoint_every=2)
    changed = nli.train(PAIRS[:5], out, steps=4, batch_size=4, seed=7, checkpoint_every=2)
    assert changed.resumed_from == 0
