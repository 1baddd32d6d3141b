"""The blocking and asyncio Python clients are twins: every public method of one has its twin in
the other, with the same parameters (names, kinds, defaults, annotations) and the same result
(an iterator for an async iterator, a value for an awaitable one). A method added, renamed or
changed on one side only fails here. (Client and Inquiry are generated from their asyncio twins,
test_sync_client_is_generated; what is written twice is the connections and the observers.)"""

import inspect
import re
from collections.abc import Callable

import pytest
from sounding_client import AsyncClient, AsyncToolUseObserver, Client, ToolUseObserver
from sounding_client.client import AsyncInquiry, Inquiry

pytestmark = pytest.mark.unit

TWINS = [(Client, AsyncClient), (Inquiry, AsyncInquiry), (ToolUseObserver, AsyncToolUseObserver)]
# What only the blocking client has: the future the threaded observer waits on.
BLOCKING_ONLY = {"Client.observe_future"}
PROTOCOL_TWINS = {"__enter__": "__aenter__", "__exit__": "__aexit__", "__iter__": "__aiter__"}
# How a blocking annotation reads on the asyncio side.
ASYNC_SPELLING = [
    (r"\bIterator\[", "AsyncIterator["),
    (r"\bClient\b", "AsyncClient"),
    (r"\bInquiry\b", "AsyncInquiry"),
]


def public_methods(cls) -> dict[str, Callable[..., object]]:
    return {
        name: member
        for name, member in inspect.getmembers(cls, callable)
        if (not name.startswith("_") or name in PROTOCOL_TWINS or name in PROTOCOL_TWINS.values())
        and not inspect.isclass(member)
    }


def asyncio_spelling(annotation: str) -> str:
    for pattern, replacement in ASYNC_SPELLING:
        annotation = re.sub(pattern, replacement, annotation)
    return annotation


def parameters(method) -> list[tuple]:
    return [
        (p.name, p.kind, p.default, str(p.annotation)) for p in inspect.signature(method).parameters.values()
    ]


@pytest.mark.parametrize("blocking,asynchronous", TWINS, ids=lambda cls: cls.__name__)
def test_every_method_has_its_twin_with_the_same_parameters_and_result(blocking, asynchronous):
    ours, theirs = public_methods(blocking), public_methods(asynchronous)
    expected = {
        PROTOCOL_TWINS.get(name, name) for name in ours if f"{blocking.__name__}.{name}" not in BLOCKING_ONLY
    }
    assert set(theirs) == expected, "methods without a twin"
    for name, method in ours.items():
        if f"{blocking.__name__}.{name}" in BLOCKING_ONLY:
            continue
        twin = theirs[PROTOCOL_TWINS.get(name, name)]
        sync_parameters = [(n, k, d, asyncio_spelling(a)) for n, k, d, a in parameters(method)]
        assert sync_parameters == parameters(twin), name
        result = asyncio_spelling(str(inspect.signature(method).return_annotation))
        assert result == str(inspect.signature(twin).return_annotation), name
        # A blocking call that waits on the network is awaited on the asyncio side; an iterator
        # is an async iterator (an async generator or an object with __aiter__), not awaited.
        if result.startswith("AsyncIterator["):
            assert not inspect.iscoroutinefunction(twin), name


def test_a_method_changed_on_one_side_only_is_caught():
    class Drifted(AsyncClient):
        async def create_collection(self, name: str, description: str = "", *, labels=None):
            raise NotImplementedError

    with pytest.raises(AssertionError):
        test_every_method_has_its_twin_with_the_same_parameters_and_result(Client, Drifted)
