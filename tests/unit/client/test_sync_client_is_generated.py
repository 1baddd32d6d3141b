"""The blocking client is generated from the asyncio one (tools/generate_sync_client.py): the
committed _sync_client.py must be what the generator makes now, so `pytest -m unit` catches a hand
edit or a forgotten regeneration as `make lint` does."""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TOOL = Path(__file__).resolve().parents[3] / "tools" / "generate_sync_client.py"


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("generate_sync_client", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The generator formats with ruff (the dev extra); the newer Pythons' unit runs go without it.
needs_ruff = pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff is not installed")


@needs_ruff
def test_the_committed_blocking_client_is_what_the_generator_makes(generator):
    assert generator.drift(generator.GENERATED.read_text()) == ""


@needs_ruff
def test_a_hand_edit_of_the_blocking_client_is_caught(generator):
    committed = generator.GENERATED.read_text()
    edited = committed.replace("def close(self)", "def close(self, force: bool = False)", 1)
    assert edited != committed
    assert "+    def close(self) -> None:" in generator.drift(edited)


def test_async_and_await_go_and_asyncio_names_take_their_blocking_spelling(generator):
    source = '"""The source."""\nasync def f(q: asyncio.Queue) -> AsyncClient:\n    await q.get()\n'
    blocking = "def f(q: queue.Queue) -> Client:\n    q.get()\n"
    assert generator.rewritten(source) == f"{generator.GENERATED_DOCSTRING}\n{blocking}"


def test_an_asyncio_name_without_a_blocking_spelling_stops_the_generator(generator):
    with pytest.raises(ValueError, match="'AsyncToolUseObserver' has no blocking spelling"):
        generator.rewritten('"""The source."""\nobserver = AsyncToolUseObserver(None)\n')
