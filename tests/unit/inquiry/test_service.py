import asyncio
import gc

import pytest
from sounding.inquiry.protocol import AskEvent, Policy, Start
from sounding.inquiry.service import InquiryService, ObservationRequest, ResumeRequest
from sounding.runtime import errors
from sounding.settings.limits import InquiryLimits
from sounding.store.tenancy import DEFAULT_TENANT, ResourceRef

pytestmark = pytest.mark.unit


class MemoryHolds:
    """The session holds of the Store contract, in memory, as one process sees them: a session
    in `elsewhere` is held by another process's stream."""

    ttl_s = 30.0

    def __init__(self):
        self.tokens: dict[ResourceRef, int] = {}
        self.elsewhere: set[ResourceRef] = set()
        self.released: list[ResourceRef] = []

    async def take(self, key, new=False):
        if key in self.elsewhere:
            return None
        self.tokens[key] = self.tokens.get(key, 0) + 1
        return self.tokens[key]

    async def holds(self, key, token):
        return key not in self.elsewhere and self.tokens.get(key) == token

    async def release(self, key, token):
        self.released.append(key)

    async def renew(self):
        pass


class MemoryStore:
    """The session part of the Store contract, in memory; counts loads."""

    def __init__(self):
        self.setups, self.states, self.loads = {}, {}, 0
        self.expiries: list[tuple[int, list[ResourceRef]]] = []
        self.session_holds = MemoryHolds()

    async def create_session(self, session_id, domain, setup_json):
        self.setups[session_id] = setup_json

    async def save_session(self, session_id, step, domain, state_json):
        self.states[session_id] = state_json

    async def load_session(self, session_id):
        self.loads += 1
        if session_id not in self.states:
            return None
        return self.setups[session_id], self.states[session_id]

    async def expire_sessions(self, idle_before_us, held):
        """Forgets every session not held (the idle times are the store's business)."""
        self.expiries.append((idle_before_us, sorted((key for key in self.states if held(key)), key=str)))
        gone = [key for key in self.states if not held(key)]
        for key in gone:
            del self.states[key], self.setups[key]
        return len(gone)


async def requests(*items, hold: asyncio.Event | None = None):
    for item in items:
        yield item
    if hold is not None:
        await hold.wait()


def test_a_resume_of_a_held_session_is_refused_before_anything_is_loaded():
    store = MemoryStore()
    service = InquiryService(store)

    async def run():
        release = asyncio.Event()
        first = service.run(requests(Start("bulls_and_cows", Policy()), hold=release))
        events = [await anext(first), await anext(first)]
        session_id = events[0].session_id
        loads = store.loads
        with pytest.raises(errors.FailedPrecondition) as busy:
            await anext(service.run(requests(ResumeRequest(session_id))))
        assert store.loads == loads  # refused without loading a state that may be stale
        release.set()
        await first.aclose()
        resumed = [e async for e in service.run(requests(ResumeRequest(session_id)))]
        return busy.value, resumed

    busy, resumed = asyncio.run(run())
    assert busy.reason == "SESSION_BUSY"
    assert isinstance(resumed[-1], AskEvent)


def test_a_session_another_orchestrators_stream_holds_is_refused_before_anything_is_loaded():
    store = MemoryStore()
    service = InquiryService(store)

    async def run():
        stream = service.run(requests(Start("bulls_and_cows", Policy())))
        session_id = (await anext(stream)).session_id
        await stream.aclose()
        key = ResourceRef("default", session_id)
        store.session_holds.elsewhere.add(key)
        loads = store.loads
        with pytest.raises(errors.FailedPrecondition) as busy:
            await anext(service.run(requests(ResumeRequest(session_id))))
        return busy.value, store.loads - loads, key

    busy, loaded, key = asyncio.run(run())
    assert busy.reason == "SESSION_BUSY" and loaded == 0
    assert store.session_holds.released == [key]  # the first stream's hold, released at its end


def test_a_stream_whose_hold_was_taken_over_ends_before_it_saves_another_step():
    store = MemoryStore()
    service = InquiryService(store)

    async def run():
        stream = service.run(
            requests(Start("bulls_and_cows", Policy()), ObservationRequest("guess-1", "0 bulls and 1 cow"))
        )
        first = await anext(stream)
        key = ResourceRef("default", first.session_id)
        saved = store.states[key]
        store.session_holds.elsewhere.add(key)  # it stalled past its TTL; another stream took it
        with pytest.raises(errors.Unavailable) as taken:
            async for _ in stream:
                pass
        return taken.value, store.states[key] == saved

    taken, unchanged = asyncio.run(run())
    assert taken.reason == "SESSION_TAKEN_OVER"
    assert unchanged


def test_a_drain_hands_a_stream_waiting_for_its_client_back_with_its_session_saved_and_released():
    store = MemoryStore()
    service = InquiryService(store)

    async def run():
        waiting = asyncio.Event()  # the client never answers
        stream = service.run(requests(Start("bulls_and_cows", Policy()), hold=waiting))
        first = await anext(stream)
        key = ResourceRef("default", first.session_id)
        while not isinstance(await anext(stream), AskEvent):
            pass
        pending = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0.05)
        assert not pending.done()  # waiting for the client's answer
        service.drain()
        with pytest.raises(errors.Unavailable) as handed_back:
            await asyncio.wait_for(pending, 30)
        resumed = [e async for e in InquiryService(store).run(requests(ResumeRequest(first.session_id)))]
        return handed_back.value, key, resumed

    handed_back, key, resumed = asyncio.run(run())
    assert handed_back.reason == "DRAINING"
    assert store.session_holds.released[0] == key
    assert isinstance(resumed[-1], AskEvent)  # the question it was on, asked again elsewhere


def test_session_locks_are_not_kept_for_sessions_no_stream_holds():
    service = InquiryService(MemoryStore())

    async def run():
        for _ in range(20):
            stream = service.run(requests(Start("bulls_and_cows", Policy())))
            await anext(stream)
            await stream.aclose()

    asyncio.run(run())
    gc.collect()
    assert len(service._locks) == 0


def test_an_answer_over_the_limit_names_the_field():
    service = InquiryService(MemoryStore(), limits=InquiryLimits(max_answer_chars=10))

    async def run():
        stream = service.run(
            requests(Start("bulls_and_cows", Policy()), ObservationRequest("guess-1", "1 2" + " " * 20))
        )
        with pytest.raises(errors.InvalidArgument) as raised:
            async for _ in stream:
                pass
        return raised.value

    assert asyncio.run(run()).field == "observation.answer"


def test_a_session_is_resumed_only_by_the_tenant_that_started_it():
    store = MemoryStore()
    service = InquiryService(store)

    async def run():
        started = service.run(requests(Start("bulls_and_cows", Policy())), tenant="acme")
        session_id = (await anext(started)).session_id
        await started.aclose()
        refused = []
        for tenant, asked in (
            ("default", session_id),
            ("other", session_id),
            ("default", f"acme.{session_id}"),
        ):
            with pytest.raises(errors.NotFound) as raised:
                await anext(service.run(requests(ResumeRequest(asked)), tenant=tenant))
            refused.append(raised.value.reason)
        resumed = [e async for e in service.run(requests(ResumeRequest(session_id)), tenant="acme")]
        return refused, resumed

    refused, resumed = asyncio.run(run())
    assert refused == ["SESSION_NOT_FOUND"] * 3
    assert isinstance(resumed[-1], AskEvent)


def test_expiry_spares_a_session_a_stream_holds_and_a_resume_of_an_expired_one_finds_nothing():
    store = MemoryStore()
    service = InquiryService(store)

    async def run():
        release = asyncio.Event()
        held = service.run(requests(Start("bulls_and_cows", Policy()), hold=release))
        held_id = (await anext(held)).session_id
        await anext(held)
        idle = [e async for e in service.run(requests(Start("bulls_and_cows", Policy())))][0].session_id
        gone = await service.expire_once(1000.0)
        with pytest.raises(errors.NotFound) as expired:
            await anext(service.run(requests(ResumeRequest(idle))))
        release.set()
        await held.aclose()
        resumed = [e async for e in service.run(requests(ResumeRequest(held_id)))]
        return gone, expired.value, resumed, held_id

    gone, expired, resumed, held_id = asyncio.run(run())
    assert gone == 1
    assert store.expiries == [(1_000_000_000, [ResourceRef(DEFAULT_TENANT, held_id)])]
    assert expired.reason == "SESSION_NOT_FOUND"
    assert isinstance(resumed[-1], AskEvent)


def test_a_retention_of_zero_keeps_sessions_forever():
    store = MemoryStore()
    service = InquiryService(store, limits=InquiryLimits(session_retention_hours=0))
    asyncio.run(asyncio.wait_for(service.expire_idle_sessions(), 1))  # returns at once
    assert store.expiries == []
