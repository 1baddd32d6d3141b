"""Nothing of ours deserialises pickles: bytes from a socket (or a file a peer could write)
are read only as protobuf, JSON or Arrow."""

import pathlib
import re

import pytest

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNPICKLERS = r"(c?pickle|cloudpickle|dill|shelve|marshal)"
UNPICKLING = re.compile(
    rf"\bimport\s+{UNPICKLERS}\b|\b{UNPICKLERS}\.loads?\(|\bfrom\s+{UNPICKLERS}\s+import\b"
)


def test_no_code_of_ours_imports_or_calls_an_unpickler():
    sources = [
        path
        for folder in ("services/sounding", "clients/python", "clients/python-api")
        for path in (ROOT / folder).rglob("*.py")
        if "/api/" not in path.as_posix()
    ]
    assert len(sources) > 50
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sources
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if UNPICKLING.search(line)
    ]
    assert offenders == []


def test_the_pattern_catches_what_it_is_for():
    for line in (
        "import pickle",
        "value = pickle.loads(data)",
        "from cloudpickle import loads",
        "import dill",
    ):
        assert UNPICKLING.search(line), line
