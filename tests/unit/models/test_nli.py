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
    assert nli.read_pairs(csv_file) == [nli.Pair("A man, walking.", "A person moves.", "entailment")]
    assert nli.read_pairs(jsonl) == [nli.Pair("p", "h", "contradiction")]


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
