import threading

import numpy as np
import pytest
from sounding.models.embedder import TorchEmbedder

# The [models] extra's torch: absent where the unit tests run without it (make test-newer-python).
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.unit


class ThreadCountRecorder:
    """Stands in for the model: records torch's thread count in the encoding thread and in a
    thread started during the encode."""

    def __init__(self):
        self.counts: list[tuple[int, int]] = []

    def encode(self, texts, **_):
        started = []
        other = threading.Thread(target=lambda: started.append(torch.get_num_threads()))
        other.start()
        other.join()
        self.counts.append((torch.get_num_threads(), started[0]))
        return np.zeros((len(texts), 384), dtype=np.float32)


@pytest.fixture(scope="module")
def embedder():
    return TorchEmbedder("cpu", single_thread_max_texts=2)


def test_small_calls_encode_on_one_thread_and_nothing_else_changes(embedder):
    torch.set_num_threads(2)
    recorder = embedder._model = ThreadCountRecorder()
    embedder.encode(["a query"])
    embedder.encode(["one", "two", "three"])
    assert recorder.counts == [(1, 2), (2, 2)]
    assert torch.get_num_threads() == 2


def test_a_failed_encode_restores_the_thread_count(embedder):
    torch.set_num_threads(2)

    class Failing:
        def encode(self, texts, **_):
            raise RuntimeError("encode failed")

    embedder._model = Failing()
    with pytest.raises(RuntimeError):
        embedder.encode(["a query"])
    assert torch.get_num_threads() == 2


def test_a_model_named_by_path_is_loaded_and_reported_by_that_name():
    from sounding.models.embedder import MODEL_NAME, bundled_model_dir

    path = str(bundled_model_dir())
    named, bundled = TorchEmbedder("cpu", model=path), TorchEmbedder("cpu")
    assert named.model_name == path and bundled.model_name == MODEL_NAME
    assert named.dimension == 384
    assert np.allclose(named.encode(["depth of water"]), bundled.encode(["depth of water"]), atol=1e-5)
