import json

import numpy as np
import pytest
from sounding.models import onnx_embedder
from sounding.models.embedder import MODEL_NAME, TorchEmbedder, bundled_model_dir
from sounding.models.onnx_embedder import OnnxEmbedder, UnsupportedModel, export_dir, exported

# The [models] extra: absent where the unit tests run without it (make test-newer-python).
pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.unit

# Lengths out of order, one past the 256-token truncation: rows must come back in the callers' order.
TEXTS = [
    "depth of water",
    "the ocean's deepest trench and the creatures that live under its crushing pressure " * 40,
    "x",
    "vitamin D and bone density in older adults",
    "five words make a sentence",
    "",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def export(cache):
    return exported(bundled_model_dir(), cache)


@pytest.fixture(scope="module")
def torch_vectors():
    return TorchEmbedder("cpu").encode(TEXTS)


def test_vectors_are_the_torch_models_row_for_row(export, torch_vectors):
    embedder = OnnxEmbedder(export, MODEL_NAME, batch_size=4, single_thread_max_texts=2)
    vectors = embedder.encode(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), embedder.dimension) == (6, 384)
    np.testing.assert_allclose(vectors, torch_vectors, atol=1e-5)
    np.testing.assert_allclose(embedder.encode(TEXTS[:1]), torch_vectors[:1], atol=1e-5)


def test_an_export_is_made_once_and_found_again(cache, export, monkeypatch):
    def refuse(*_):
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_embedder, "export", refuse)
    assert exported(bundled_model_dir(), cache) == export
    assert json.loads((export / "sounding.json").read_text()) == {"max_seq_length": 256, "dimension": 384}
    assert not list(export.parent.glob("*.partial-*"))


class Recorder:
    def __init__(self, name, calls):
        self.name, self.calls = name, calls

    def run(self, _, feeds):
        self.calls.append((self.name, len(feeds["input_ids"])))
        return [np.zeros((len(feeds["input_ids"]), 384), dtype=np.float32)]


def test_small_calls_run_on_the_one_thread_session_and_large_ones_in_passes(export):
    embedder = OnnxEmbedder(export, MODEL_NAME, batch_size=2, single_thread_max_texts=2)
    calls = []
    embedder._session, embedder._small_session = Recorder("wide", calls), Recorder("one", calls)
    embedder.encode(["a", "b"])
    embedder.encode(["a", "b", "c", "d", "e"])
    assert calls == [("one", 2), ("wide", 2), ("wide", 2), ("wide", 1)]


def mean_pooled_copy(tmp_path, pooling: dict):
    """The bundled model's files, linked, with another pooling configuration."""
    source = bundled_model_dir()
    for path in source.rglob("*"):
        if path.is_file():
            target = tmp_path / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    config = tmp_path / "1_Pooling" / "config.json"
    settings = json.loads(config.read_text())
    config.unlink()
    config.write_text(json.dumps(settings | pooling))
    return tmp_path


def test_a_model_that_is_not_mean_pooled_is_refused_and_auto_falls_back_to_torch(tmp_path):
    from sounding.assembly.sidecar import load_embedder
    from sounding.settings.config import ModelsSettings

    model = mean_pooled_copy(
        tmp_path / "cls", {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}
    )
    assert export_dir(tmp_path / "cache", model) != export_dir(tmp_path / "cache", bundled_model_dir())
    with pytest.raises(UnsupportedModel, match="backend to torch"):
        exported(model, tmp_path / "cache")
    models = ModelsSettings(cache_dir=tmp_path / "cache", embedder={"model": str(model)})
    assert isinstance(load_embedder(models, "cpu"), TorchEmbedder)
    explicit = ModelsSettings(cache_dir=tmp_path / "cache", embedder={"model": str(model), "backend": "onnx"})
    with pytest.raises(UnsupportedModel):
        load_embedder(explicit, "cpu")


def test_auto_is_onnx_runtime_on_cpu_and_torch_elsewhere(cache, monkeypatch):
    from sounding.assembly import sidecar
    from sounding.settings.config import ModelsSettings

    models = ModelsSettings(cache_dir=cache)
    assert isinstance(sidecar.load_embedder(models, "cpu"), OnnxEmbedder)
    monkeypatch.setattr(sidecar, "TorchEmbedder", lambda device, *_: ("torch", device))
    assert sidecar.load_embedder(models, "cuda") == ("torch", "cuda")
    torch_on_cpu = ModelsSettings(cache_dir=cache, embedder={"backend": "torch"})
    assert sidecar.load_embedder(torch_on_cpu, "cpu") == ("torch", "cpu")
