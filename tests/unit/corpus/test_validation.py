import pytest
from sounding.corpus.documents import DocumentIn, chunk_rows, validate_batch
from sounding.runtime import errors
from sounding.settings.limits import CorpusLimits
from sounding.store.collections import CollectionInfo
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "documents,field",
    [
        ([DocumentIn("a", "x"), DocumentIn("a", "y")], "documents[1].id"),
        ([DocumentIn("a", "x"), DocumentIn("b", "y"), DocumentIn("a", "z")], "documents[2].id"),
    ],
)
def test_bad_batches_name_the_document(documents, field):
    with pytest.raises(errors.InvalidArgument) as raised:
        validate_batch(documents)
    assert raised.value.field == field


def test_good_batch_passes():
    validate_batch([DocumentIn("a", "x"), DocumentIn("b", "y", "title", {"k": "v"})])


@pytest.mark.parametrize(
    "document,field",
    [
        (DocumentIn("a", "x", title="t" * 1_048_576), "documents[0].title"),
        (DocumentIn("a", "x" * (CorpusLimits().max_text_chars + 1)), "documents[0].text"),
        (DocumentIn("a", "x", metadata={f"k{i}": "v" for i in range(65)}), "documents[0].metadata"),
        (DocumentIn("a", "x", metadata={"k" * 257: "v"}), "documents[0].metadata"),
        (DocumentIn("a", "x", metadata={"k": "v" * 4097}), "documents[0].metadata"),
        (DocumentIn("a" * 513, "x"), "documents[0].id"),
    ],
)
def test_fields_over_their_limits_name_the_field(document, field):
    with pytest.raises(errors.InvalidArgument) as raised:
        validate_batch([document])
    assert raised.value.field == field


def test_a_document_making_too_many_chunks_is_refused_before_anything_is_embedded():
    info = CollectionInfo(ResourceRef("default", "c"), "", 0, "m", 2, chunk_words=10, chunk_overlap_words=0)
    limits = CorpusLimits(max_chunks_per_document=5, max_chunks_per_batch=8)
    assert len(chunk_rows([DocumentIn("a", "w " * 50)], info, limits)) == 5
    with pytest.raises(errors.InvalidArgument) as per_document:
        chunk_rows([DocumentIn("a", "w " * 51)], info, limits)
    assert per_document.value.field == "documents[0].text"
    with pytest.raises(errors.InvalidArgument) as per_batch:
        chunk_rows([DocumentIn("a", "w " * 50), DocumentIn("b", "w " * 40)], info, limits)
    assert per_batch.value.field == "documents"


def test_a_chunk_of_identifiers_adds_a_bounded_number_of_graph_edges():
    from collections import Counter

    from sounding.corpus.graph import count_graph

    identifiers = " ".join(f"GENE{i}X" for i in range(400))  # 400 entities in one chunk
    chunk_counts, edges = Counter(), Counter()
    count_graph([identifiers], 16, chunk_counts, edges)
    assert len(chunk_counts) == 16 and len(edges) == 16 * 15 // 2
