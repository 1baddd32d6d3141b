import pytest
from sounding.core.chunking import chunk_words

pytestmark = pytest.mark.unit


def test_short_text_is_one_chunk():
    assert [c.text for c in chunk_words("  a b c ", 5, 1)] == ["a b c"]


def test_long_text_windows_overlap_and_end_at_the_end():
    words = [f"w{i}" for i in range(23)]
    chunks = chunk_words(" ".join(words), 10, 3)
    texts = [c.text.split() for c in chunks]
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert all(len(t) == 10 for t in texts)
    assert texts[0][:1] == ["w0"] and texts[-1][-1] == "w22"
    assert texts[1][:3] == texts[0][-3:]  # overlap of 3 words
    assert set(words) == {w for t in texts for w in t}


@pytest.mark.parametrize("max_words,overlap", [(0, 0), (5, 5), (5, -1)])
def test_rejects_bad_windows(max_words, overlap):
    with pytest.raises(ValueError):
        chunk_words("a b c", max_words, overlap)
