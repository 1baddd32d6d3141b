"""The tool registry and its learner on a real LanceDB directory, with a bag-of-words embedder and
scripted teachers standing in for the sidecar."""

import asyncio
import hashlib
import re
from unittest.mock import AsyncMock

import numpy as np
import pytest
from sounding.runtime import errors
from sounding.settings.config import ToolSettings
from sounding.settings.limits import ToolLimits
from sounding.store.database import Database
from sounding.store.location import StoreLocation
from sounding.store.tools import ToolStore, ToolUseRecord
from sounding.tools.learner import ToolLearner
from sounding.tools.protocol import ToolConfig, ToolSpec, ToolUse
from sounding.tools.registry import ToolRegistry, tool_text

pytestmark = pytest.mark.unit

DIMENSION = 256


class Words:
    """Each word a fixed random direction; a text the unit sum of its words'."""

    async def embed(self, texts, timeout=None):
        rows = []
        for text in texts:
            vector = np.zeros(DIMENSION, np.float32)
            for word in re.findall(r"[a-z]+", text.lower()):
                seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
                vector += np.random.default_rng(seed).standard_normal(DIMENSION).astype(np.float32)
            rows.append(vector / max(float(np.linalg.norm(vector)), 1e-9))
        return np.stack(rows)


class Teacher:
    def __init__(self, answer=None, error=None):
        self.answer, self.error, self.asked = answer, error, []

    async def label(self, request, candidates):
        self.asked.append((request, [n for n, _ in candidates]))
        if self.error:
            raise self.error
        return self.answer


TOOLS = [
    ToolSpec(name="get_weather", description="forecast rain sun wind temperature"),
    ToolSpec(name="send_email", description="write mail message recipient inbox"),
    ToolSpec(name="book_flight", description="airline ticket airport departure"),
]


async def open_learner(path, teacher=None, limits=None, **settings):
    store = await ToolStore.open(await Database.open(StoreLocation(str(path))))
    defaults = {"margin_floor": 0.05, "description_weight": 1.0, "trust_successful_uses": False}
    config = ToolConfig(ToolSettings(**{**defaults, **settings}), limits or ToolLimits())
    registry = await ToolRegistry.restore(store, Words(), config)
    learner = ToolLearner(store, registry, Words(), teacher, config)
    await learner.start()
    return store, registry, learner


def test_tool_text_reads_names_as_words_with_description_and_parameters():
    text = tool_text("ChaDri.change_drink", "Changes a drink.", '{"properties": {"size": {}, "milk": {}}}')
    assert text == "Cha Dri change drink: Changes a drink. Parameters: size, milk."


def test_registry_versions_lists_and_routes(tmp_path):
    async def run():
        store, registry, learner = await open_learner(tmp_path)
        assert await registry.put("ts", TOOLS) == (1, 3)
        assert await registry.put("ts", [ToolSpec(name="get_weather", description="forecast")]) == (2, 3)
        assert await registry.delete("ts", ["send_email"]) == (3, 2)
        page, token, version = registry.list("ts", 1, "")
        route, _ = await registry.route("ts", "the forecast for tomorrow", 5)
        await learner.close()
        restored = await ToolRegistry.restore(store, Words(), ToolConfig())
        return page, token, version, route, restored.list("ts", 10, "")

    page, token, version, route, (again, _, again_version) = asyncio.run(run())
    assert [(t.name, t.version) for t in page] == [("book_flight", 1)] and token == "book_flight"
    assert version == 3 and again_version == 3
    assert [(t.name, t.description, t.version) for t in again] == [
        ("book_flight", "airline ticket airport departure", 1),
        ("get_weather", "forecast", 2),
    ]
    assert route.top1 == "get_weather" and [n for n, _ in route.candidates] == ["get_weather", "book_flight"]


@pytest.mark.parametrize(
    "specs, field",
    [
        ([TOOLS[0], TOOLS[0]], "tools[1].name"),
        ([ToolSpec(name="x", description="d", parameters_json="{not json")], "tools[0].parameters_json"),
        ([ToolSpec(name="x", description="d", parameters_json="[1]")], "tools[0].parameters_json"),
    ],
)
def test_malformed_puts_name_the_field_and_change_nothing(tmp_path, specs, field):
    async def run():
        _, registry, learner = await open_learner(tmp_path)
        with pytest.raises(errors.InvalidArgument) as refused:
            await registry.put("ts", specs)
        await learner.close()
        return refused.value, registry.has("ts")

    refused, exists = asyncio.run(run())
    assert refused.field == field and not exists


def test_unknown_toolsets_and_tools_are_not_found(tmp_path):
    async def run():
        _, registry, learner = await open_learner(tmp_path)
        await registry.put("ts", TOOLS)
        with pytest.raises(errors.NotFound) as no_toolset:
            await registry.route("other", "rain", 3)
        with pytest.raises(errors.NotFound) as no_tool:
            await registry.delete("ts", ["get_weather", "nope"])
        await learner.close()
        return no_toolset.value, no_tool.value, registry.list("ts", 10, "")[0]

    no_toolset, no_tool, tools = asyncio.run(run())
    assert no_toolset.field == "toolset" and no_tool.field == "names[1]"
    assert len(tools) == 3  # nothing deleted


def observed(tmp_path, uses, teacher=None, **settings):
    async def run():
        store, registry, learner = await open_learner(tmp_path, teacher, **settings)
        await registry.put("ts", TOOLS)
        before = await registry.route("ts", uses[0].request, 3)
        recorded, rejected = await learner.observe(list(enumerate(uses)))
        await learner.idle()
        after = await registry.route("ts", uses[0].request, 3)
        metrics = await learner.metrics("ts", 2)
        await learner.close()
        return recorded, rejected, before, after, metrics

    return asyncio.run(run())


def test_free_tier_labels_a_confident_fallback_use_and_keeps_it_from_routing_until_validated(tmp_path):
    use = ToolUse(toolset="ts", request="forecast rain tomorrow", used_tool="shell")
    recorded, rejected, before, after, metrics = observed(tmp_path, [use], margin_floor=0.0)
    assert (recorded, rejected) == (1, [])
    assert before[0].top1 == "get_weather"
    assert (
        metrics.flagged_fallback == 1 and metrics.labels_free == 1 and metrics.exemplars == {"get_weather": 1}
    )
    # No trusted use has validated the free tier: routing is the descriptions' still.
    assert after[0].candidates == before[0].candidates and not metrics.untrusted_exemplars_route


def test_below_the_margin_floor_the_teacher_labels(tmp_path):
    teacher = Teacher(answer="send_email")
    use = ToolUse(toolset="ts", request="tell my boss about the airport", used_tool="shell")
    _, _, before, after, metrics = observed(tmp_path, [use], teacher, margin_floor=2.0)
    [(request, candidates)] = teacher.asked
    assert request == use.request and set(candidates) == {"get_weather", "send_email", "book_flight"}
    assert metrics.labels_teacher == 1 and metrics.labels_free == 0 and metrics.exemplars == {"send_email": 1}
    assert after[0].candidates == before[0].candidates  # not validated by trusted uses yet


@pytest.mark.parametrize("teacher", [Teacher(error=RuntimeError("down")), Teacher(answer=None), None])
def test_a_teacher_that_fails_declines_or_is_off_drops_the_event(tmp_path, teacher):
    use = ToolUse(toolset="ts", request="tell my boss about the airport", used_tool="shell")
    recorded, _, _, _, metrics = observed(tmp_path, [use], teacher, margin_floor=2.0)
    assert recorded == 1 and metrics.processed == 1 and metrics.flagged_fallback == 1
    assert metrics.teacher_dropped == 1 and metrics.exemplars == {}


def test_a_trusted_successful_use_is_its_own_label(tmp_path):
    teacher = Teacher(answer="get_weather")
    uses = [
        ToolUse(toolset="ts", request="tell my boss about the airport", used_tool="send_email", success=True),
        ToolUse(
            toolset="ts", request="tell my boss about the airport", used_tool="send_email", success=False
        ),
    ]
    _, _, before, _, metrics = observed(tmp_path, uses, teacher, margin_floor=2.0, trust_successful_uses=True)
    assert before[0].top1 != "send_email"
    assert metrics.labels_trusted == 1 and metrics.labels_teacher == 1 and len(teacher.asked) == 1
    assert metrics.exemplars == {"send_email": 1, "get_weather": 1}


def test_an_agreeing_use_is_not_flagged_and_counts_as_a_correct_route(tmp_path):
    uses = [
        ToolUse(toolset="ts", request="forecast rain", used_tool="get_weather"),
        ToolUse(toolset="ts", request="forecast rain", used_tool="shell"),
        ToolUse(toolset="ts", request="airline ticket", used_tool="book_flight"),
    ]
    _, _, _, _, metrics = observed(tmp_path, uses, margin_floor=2.0)
    assert metrics.processed == 3 and metrics.flagged_fallback == 1 and metrics.flagged_disagreement == 0
    assert metrics.accuracy == 1.0  # the two labelled (agreeing) uses; the fallback went unlabelled
    assert [(w.first_sequence, w.last_sequence, w.labelled) for w in metrics.accuracy_windows] == [
        (0, 1, 1),
        (2, 2, 1),
    ]


def test_events_for_unknown_toolsets_or_over_limits_are_rejected_by_position(tmp_path):
    uses = [
        ToolUse(toolset="ts", request="forecast", used_tool="get_weather"),
        ToolUse(toolset="nope", request="forecast", used_tool="get_weather"),
        ToolUse(toolset="ts", request="x" * 10_000, used_tool="get_weather"),
        ToolUse(toolset="ts", request="forecast", used_tool="y" * 129),
    ]
    recorded, rejected, _, _, metrics = observed(tmp_path, uses)
    assert recorded == 1 and metrics.events == 1
    assert [(r.index, r.code) for r in rejected] == [
        (1, "NOT_FOUND"),
        (2, "INVALID_ARGUMENT"),
        (3, "INVALID_ARGUMENT"),
    ]


class Gate:
    """An embedder that holds every call until the test opens it."""

    def __init__(self):
        self.open = asyncio.Event()
        self.calls = 0

    async def embed(self, texts, timeout=None):
        self.calls += 1
        await self.open.wait()
        return await Words().embed(texts)


def test_a_full_queue_leaves_events_to_the_store_and_the_learner_catches_up(tmp_path):
    async def run():
        store = await ToolStore.open(await Database.open(StoreLocation(str(tmp_path))))
        config = ToolConfig(ToolSettings(margin_floor=0.0, batch_size=1), ToolLimits(learner_queue=2))
        registry = await ToolRegistry.restore(store, Words(), config)
        await registry.put("ts", TOOLS)
        gate = Gate()
        learner = ToolLearner(store, registry, gate, None, config)
        await learner.start()
        uses = [ToolUse(toolset="ts", request=f"forecast rain {i}", used_tool="shell") for i in range(8)]
        recorded, _ = await learner.observe(list(enumerate(uses[:1])))
        while gate.calls == 0:  # the worker holds the first event, in its embedding call
            await asyncio.sleep(0.001)
        more, _ = await learner.observe([(i, u) for i, u in enumerate(uses[1:], 1)])
        dropped = learner.dropped
        gate.open.set()
        await learner.idle()
        metrics = await learner.metrics("ts", 10)
        await learner.close()
        return recorded + more, dropped, metrics

    recorded, dropped, metrics = asyncio.run(run())
    assert recorded == 8 and dropped == 8 - 1 - 2
    assert metrics.events == 8 and metrics.processed == 8 and metrics.labels_free == 8
    assert metrics.dropped_since_start == 5 and metrics.exemplars == {"get_weather": 8}


def test_a_start_processes_every_event_left_unlabelled_however_far_back(tmp_path):
    async def run():
        store, registry, learner = await open_learner(tmp_path, margin_floor=0.0)
        await registry.put("ts", TOOLS)
        uses = [ToolUse(toolset="ts", request=f"forecast rain {i}", used_tool="shell") for i in range(3)]
        await learner.observe(list(enumerate(uses)))
        await learner.idle()
        await learner.close()
        # Recorded by an orchestrator that died before processing the first and last of them
        # (the middle one was processed, so the last label is after them).
        stopped = ToolLearner(store, registry, Words(), None, ToolConfig(ToolSettings(margin_floor=0.0)))
        stopped._tasks = []
        late = [ToolUse(toolset="ts", request=f"airline ticket {i}", used_tool="shell") for i in range(3)]
        await stopped.observe(list(enumerate(late)))
        first, middle, last = await store.unlabelled_events(10)
        await stopped._process([middle])
        waiting = [r.sequence for r in await store.unlabelled_events(10)]
        _, _, again = await open_learner(tmp_path, margin_floor=0.0)
        await again.idle()
        metrics = await again.metrics("ts", 10)
        await again.close()
        return waiting, [first.sequence, last.sequence], metrics

    waiting, expected, metrics = asyncio.run(run())
    assert waiting == expected
    assert metrics.events == 6 and metrics.processed == 6 and metrics.labels_free == 6
    assert metrics.exemplars == {"get_weather": 3, "book_flight": 3}


class SlowTeacher:
    """Answers `send_email` once the test lets it."""

    def __init__(self):
        self.go = asyncio.Event()
        self.asked = 0

    async def label(self, request, candidates):
        self.asked += 1
        await self.go.wait()
        return "send_email"


def test_a_slow_teacher_holds_nothing_up_and_its_full_lane_drops(tmp_path):
    async def run():
        teacher = SlowTeacher()
        store, registry, learner = await open_learner(
            tmp_path, teacher, ToolLimits(teacher_queue=5), margin_floor=2.0
        )
        await registry.put("ts", TOOLS)
        asking = [ToolUse(toolset="ts", request=f"tell my boss {i}", used_tool="shell") for i in range(6)]
        agreeing = ToolUse(toolset="ts", request="forecast rain", used_tool="get_weather")
        await learner.observe(list(enumerate(asking)))
        await learner.observe([(0, agreeing)])
        while (await learner.metrics("ts", 10)).processed < 2:  # the agreeing use and the overflow
            await asyncio.sleep(0.01)
        waiting = await learner.metrics("ts", 10)
        teacher.go.set()
        await learner.idle()
        done = await learner.metrics("ts", 10)
        await learner.close()
        return teacher, waiting, done

    teacher, waiting, done = asyncio.run(run())
    # Four asked, one waiting, one over the lane's limit; the agreeing use went through.
    assert (waiting.processed, waiting.teacher_dropped, waiting.labels_teacher) == (2, 1, 0)
    assert teacher.asked == 5
    assert (done.processed, done.labels_teacher, done.teacher_dropped) == (7, 5, 1)
    assert done.exemplars == {"send_email": 5} and done.flagged_share == 6 / 7


def test_deleting_tools_can_forget_what_they_learned(tmp_path):
    async def run():
        store, registry, learner = await open_learner(tmp_path, margin_floor=0.0)
        await registry.put("ts", TOOLS)
        described, _ = await registry.route("ts", "forecast rain tomorrow", 3)
        use = ToolUse(toolset="ts", request="forecast rain tomorrow", used_tool="shell")
        await learner.observe([(0, use)])
        await learner.idle()
        kept = await registry.delete("ts", ["send_email"])  # exemplars of other tools untouched
        await registry.delete("ts", ["get_weather"], forget_exemplars=True)
        await registry.put("ts", [TOOLS[0], TOOLS[1]])
        again, _ = await registry.route("ts", "forecast rain tomorrow", 3)
        await learner.close()
        restored = await ToolRegistry.restore(store, Words(), ToolConfig())
        return kept, described, again, registry.exemplar_counts("ts"), restored.exemplar_counts("ts")

    kept, described, again, counts, restored_counts = asyncio.run(run())
    assert kept == (2, 2)
    assert counts == {} and restored_counts == {}
    assert [n for n, _ in again.candidates] == [n for n, _ in described.candidates]
    assert [s for _, s in again.candidates] == pytest.approx([s for _, s in described.candidates])


def test_two_orchestrators_on_one_store_record_every_event_once_and_route_with_what_either_learned(tmp_path):
    async def run():
        _, registry_a, learner_a = await open_learner(tmp_path, margin_floor=0.0)
        store_b, registry_b, learner_b = await open_learner(tmp_path, margin_floor=0.0)
        await registry_a.put("ts", TOOLS)
        await registry_b.catch_up()
        shown_to_b = registry_b.list("ts", 0, "")
        rain = [ToolUse(toolset="ts", request=f"forecast rain {i}", used_tool="shell") for i in range(4)]
        flights = [ToolUse(toolset="ts", request=f"airline ticket {i}", used_tool="shell") for i in range(4)]
        await asyncio.gather(
            learner_a.observe(list(enumerate(rain))), learner_b.observe(list(enumerate(flights)))
        )
        await asyncio.gather(learner_a.idle(), learner_b.idle())
        # One event processed again by B (as when B takes up what A still holds): its label and
        # exemplar are in the store twice.
        processed_twice = next(e for e in await store_b.exemplars_since(0) if e.tool == "get_weather")
        event = ToolUseRecord(
            sequence=processed_twice.sequence,
            toolset="ts",
            request=processed_twice.request,
            used_tool="shell",
        )
        learner_b._held.add(event.sequence)
        await learner_b._process([event])
        await registry_a.catch_up()
        await registry_b.catch_up()
        metrics = await learner_a.metrics("ts", 10)
        _, restored, again = await open_learner(tmp_path, margin_floor=0.0)
        counts = [r.exemplar_counts("ts") for r in (registry_a, registry_b, restored)]
        weather = [
            (await r.route("ts", "forecast rain tomorrow", 3, ()))[0].margin for r in (registry_a, registry_b)
        ]
        for learner in (learner_a, learner_b, again):
            await learner.close()
        sequences = sorted(e.sequence for e in await store_b.exemplars_since(0))
        return shown_to_b, metrics, counts, weather, sequences

    shown_to_b, metrics, counts, weather, sequences = asyncio.run(run())
    assert [tool.name for tool in shown_to_b[0]] == sorted(t.name for t in TOOLS) and shown_to_b[2] == 1
    assert len(set(sequences)) == 8 and len(sequences) == 9  # 8 events, distinct; one written twice
    assert metrics.events == 8 and metrics.processed == 8 and metrics.labels_free == 8
    assert counts == [{"get_weather": 4, "book_flight": 4}] * 3
    assert weather[0] == pytest.approx(weather[1], rel=1e-6)  # both route with all 8 exemplars


def test_a_put_builds_on_another_orchestrators_version_and_the_tools_are_read_only_when_they_moved(tmp_path):
    async def run():
        _, registry_a, learner_a = await open_learner(tmp_path)
        store_b, registry_b, learner_b = await open_learner(tmp_path)
        store_b.tools = AsyncMock(side_effect=store_b.tools)  # counts the reads of the tools table
        await registry_a.put("ts", TOOLS[:1])
        put = await registry_b.put("ts", TOOLS[1:2])  # A's version 1 is read and built on
        await registry_b.catch_up()  # B's own put moved the table: read once more
        await registry_b.catch_up()  # nothing moved: nothing read
        deleted = await registry_b.delete("ts", [TOOLS[0].name])  # nothing moved: nothing read
        for learner in (learner_a, learner_b):
            await learner.close()
        return put, deleted, store_b.tools.await_count

    put, deleted, reads = asyncio.run(run())
    assert put == (2, 2) and deleted == (3, 1)
    assert reads == 2
