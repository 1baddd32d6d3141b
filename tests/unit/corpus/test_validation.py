import pytest
from sounding import errors
from sounding.corpus.service import DocumentIn, validate_batch, validate_collection_name

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "documents,field",
    [
        ([], "documents"),
        ([DocumentIn("a", "x"), DocumentIn("", "y")], "documents[1].id"),
        ([DocumentIn("a", "x"), DocumentIn("b", "  ")], "documents[1].text"),
        ([DocumentIn("a", "x"), DocumentIn("a", "y")], "documents[1].id"),
        ([DocumentIn("a#1", "x")], "documents[0].id"),
    ],
)
def test_bad_batches_name_the_document(documents, field):
    with pytest.raises(errors.InvalidArgument) as raised:
        validate_batch(documents)
    assert raised.value.field == field


def test_good_batch_passes():
    validate_batch([DocumentIn("a", "x"), DocumentIn("b", "y", "title", {"k": "v"})])


@pytest.mark.parametrize("name", ["", "Upper", "-lead", "a" * 65, "has space", "dot.ted"])
def test_bad_collection_names(name):
    with pytest.raises(errors.InvalidArgument):
        validate_collection_name(name)


@pytest.mark.parametrize("name", ["a", "beir-scifact-1", "x_y", "0" * 64])
def test_good_collection_names(name):
    validate_collection_name(name)
