"""The outcome model's update (active-learning spec §5): predictions move towards what executed
queries actually did, and grow surer as outcomes accumulate."""

import numpy as np
import pytest
from sounding.core.reach import ReachModel

pytestmark = pytest.mark.unit

FEATURES = ("bias", "novelty")


def test_an_untrained_model_predicts_even_odds_with_low_confidence():
    model = ReachModel(FEATURES)
    probability, confidence = model.predict([1.0, 1.0])
    assert probability == pytest.approx(0.5)
    assert confidence == pytest.approx(1 / 3)  # logit variance 1 + 1


def test_one_update_moves_the_mean_towards_the_outcome_and_adds_curvature():
    model = ReachModel(FEATURES)
    model.update([1.0, 0.0], reached=1.0)
    # The MAP of 0.5·w² − log σ(w): w = σ(−w), w ≈ 0.4013; precision 1 + σ(w)σ(−w).
    w = model.mean[0]
    assert w == pytest.approx(1 / (1 + np.exp(w)), abs=1e-9)
    assert w == pytest.approx(0.40106, abs=1e-5)
    assert model.precision[0] == pytest.approx(1 + (1 / (1 + np.exp(-w))) * (1 / (1 + np.exp(w))))
    assert (model.mean[1], model.precision[1]) == (0.0, 1.0)  # an absent feature is untouched


def test_learning_separates_novel_from_redundant_queries_and_grows_confident():
    model = ReachModel(FEATURES)
    rng = np.random.default_rng(0)
    before = model.predict([1.0, 0.9])[1]
    errors = []
    for _ in range(200):
        novelty = float(rng.random())
        reached = float(novelty > 0.5)  # novel queries reach new text
        predicted, _ = model.predict([1.0, novelty])
        errors.append(abs(predicted - reached))
        model.update([1.0, novelty], reached)
    assert model.predict([1.0, 0.9])[0] > 0.7 > 0.4 > model.predict([1.0, 0.1])[0]
    assert model.predict([1.0, 0.9])[1] > before
    assert np.mean(errors[-50:]) < np.mean(errors[:50])  # prediction error decreases (§7.2)


def test_the_model_round_trips_through_its_stored_form():
    model = ReachModel(FEATURES)
    model.update([1.0, 0.5], 0.0)
    again = ReachModel.from_dict(model.to_dict())
    assert again.to_dict() == model.to_dict() and again.predict([1, 1]) == model.predict([1, 1])
