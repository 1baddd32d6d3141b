import json

import numpy as np
import pytest
from sounding.models import nli

pytestmark = pytest.mark.unit


def test_pairs_are_read_from_csv_and_jsonl_and_unlabelled_ones_skipped(tmp_path):
    csv_file = tmp_path / "dev.csv"
    csv_file.write_text('premise,hypothesis,label\n"A man, walking.",A person moves.,entailment\nx,y,-\n')
    jsonl = tmp_path / "test.jsonl"
    jsonl.write_text(
        json.dumps({"premise": "p", "hypothesis": "h", "label": "contradiction"})
        + "\n\n"
        + json.dumps({"premise": "p", "hypothesis": "h", "label": ""})
        + "\n"
    )
    read = nli.read_pairs(csv_file)
    assert read.pairs == [nli.Pair("A man, walking.", "A person moves.", "entailment")]
    assert read.skipped == {"no label": 1} and not read.two_way
    read = nli.read_pairs(jsonl)
    assert read.pairs == [nli.Pair("p", "h", "contradiction")] and read.skipped == {"no label": 1}


def test_a_two_way_set_keeps_its_not_entailment_rows_and_counts_what_it_leaves_out(tmp_path):
    rows = [
        ("p", "h", "entailment"),
        ("p", "h", "not_entailment"),
        ("p", "h", "Not-Entailment"),
        ("p", "h", "maybe"),
    ]
    path = tmp_path / "scitail.jsonl"
    path.write_text("\n".join(json.dumps({"premise": p, "hypothesis": h, "label": x}) for p, h, x in rows))
    read = nli.read_pairs(path)
    assert [p.label for p in read.pairs] == ["entailment", "not_entailment", "not_entailment"]
    assert read.two_way and read.skipped == {"label maybe": 1}


def test_balanced_class_weights_make_every_class_weigh_alike_in_the_loss():
    labels = ["neutral"] * 6 + ["entailment"] * 3 + ["contradiction"]
    weights = nli.class_weights(labels)
    assert np.allclose(weights, [10 / 9, 10 / 18, 10 / 3])
    counts = np.array([3, 6, 1])
    assert np.allclose(weights * counts, len(labels) / 3)
    assert np.allclose(nli.class_weights(["neutral", "entailment"]), [2 / 3, 2 / 3, 1.0])


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A small random BERT classifier whose labels come in another order and case than ours."""
    pytest.importorskip("transformers")  # the [models] extra
    from sounding.models.embedder import bundled_model_dir
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    path = tmp_path_factory.mktemp("tiny-nli")
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=3,
        id2label={0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"},
        label2id={"CONTRADICTION": 0, "ENTAILMENT": 1, "NEUTRAL": 2},
    )
    BertForSequenceClassification(config).save_pretrained(path)
    AutoTokenizer.from_pretrained(bundled_model_dir()).save_pretrained(path)
    return path


def test_predictions_are_probabilities_in_our_label_order(tiny_model):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = nli.NliModel(tiny_model, batch_size=2)
    pairs = [("a dog runs", "an animal moves"), ("a cat sleeps", "a cat is awake"), ("x", "y")]
    probabilities = model.predict(pairs)
    assert probabilities.shape == (3, 3)
    assert np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    # Columns follow LABELS (entailment, neutral, contradiction) whatever the model's order.
    raw_model = AutoModelForSequenceClassification.from_pretrained(tiny_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    with torch.inference_mode():
        raw = torch.softmax(
            raw_model(**tokenizer(["a dog runs"], ["an animal moves"], return_tensors="pt")).logits, -1
        )
    assert probabilities[0] == pytest.approx(raw[0, [1, 2, 0]].numpy(), abs=1e-5)


def test_a_model_without_nli_labels_is_refused(tmp_path, tiny_model):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(tiny_model)
    model.config.id2label = {0: "positive", 1: "negative", 2: "mixed"}
    model.save_pretrained(tmp_path / "sentiment")
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(tmp_path / "sentiment")
    with pytest.raises(ValueError, match="do not name"):
        nli.NliModel(tmp_path / "sentiment")


class Scripted:
    """Answers each pair with the probabilities given for it."""

    def __init__(self, rows):
        self.rows = np.asarray(rows, float)

    def predict(self, pairs):
        return self.rows[: len(pairs)]


def test_a_two_way_set_is_scored_with_neutral_and_contradiction_as_not_entailment():
    pairs = [
        nli.Pair("p", "h", "entailment"),
        nli.Pair("p", "h", "not_entailment"),
        nli.Pair("p", "h", "not_entailment"),
        nli.Pair("p", "h", "contradiction"),  # a three-way gold label in a two-way set
    ]
    # predicted: entailment, neutral, entailment, contradiction
    model = Scripted([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]])
    result = nli.evaluate(model, pairs)
    assert result["classes"] == ["entailment", "not_entailment"]
    assert result["accuracy"] == 0.75
    # entailment: precision 1/2, recall 1 -> 2/3; not_entailment: precision 1, recall 2/3 -> 0.8
    assert result["f1"] == {"entailment": 0.6667, "not_entailment": 0.8}


def test_a_three_way_set_is_scored_per_class():
    pairs = [nli.Pair("p", "h", label) for label in ("entailment", "neutral", "contradiction")]
    result = nli.evaluate(Scripted(np.eye(3)[[0, 1, 1]]), pairs)
    assert result["classes"] == list(nli.LABELS) and result["accuracy"] == pytest.approx(0.6667, abs=1e-4)
    assert result["f1"]["contradiction"] == 0.0
