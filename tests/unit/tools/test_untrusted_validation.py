"""The free and teacher tiers' exemplars route only when trusted uses held back from the fold
confirm them (issue 48, item 4): without trusted uses routing stays the descriptions', with
confirming uses they route, with contradicting ones they do not, and a restart decides the same."""

import asyncio

import numpy as np
import pytest
from sounding.core.tool_routing import CentroidBank, LabelTier, untrusted_labels_validate
from sounding.settings.config import ToolSettings
from sounding.store.database import Database
from sounding.store.location import StoreLocation
from sounding.store.tools import ExemplarRecord, ToolStore
from sounding.tools.protocol import ToolConfig
from sounding.tools.registry import ToolRegistry

from .test_learner import TOOLS, Words

pytestmark = pytest.mark.unit

# Words in no tool's description: the descriptions alone rank these requests by chance.
REQUEST = "umbrella tomorrow"
HELD_BACK_SEQUENCES = [1, 3, 5, 7]  # odd sequences are held back from the fold
FOLDED_SEQUENCES = [2, 4]


def exemplar(sequence, tool, tier, vector):
    return ExemplarRecord(
        sequence=sequence, toolset="ts", tool=tool, request=REQUEST, tier=tier, embedding=vector
    )


def untrusted(label, count, first=100):
    return [(first + i, label, LabelTier.FREE) for i in range(count)]


def trusted(sequences, tool="get_weather"):
    return [(q, tool, LabelTier.TRUSTED) for q in sequences]


def routed(tmp_path, exemplars, batches=1, **settings):
    """(untrusted_route, route of REQUEST, the same after a restart from the store); the
    exemplars are saved in `batches` learner batches."""

    async def run():
        store = await ToolStore.open(await Database.open(StoreLocation(str(tmp_path))))
        defaults = {"description_weight": 1.0, "untrusted_validation_uses": len(HELD_BACK_SEQUENCES)}
        config = ToolConfig(ToolSettings(**defaults | settings))
        registry = await ToolRegistry.restore(store, Words(), config)
        await registry.put("ts", TOOLS)
        [vector] = await Words().embed([REQUEST])
        records = [exemplar(q, tool, tier, vector) for q, tool, tier in exemplars]
        size = max(1, -(-len(records) // batches))
        for start in range(0, len(records), size):
            registry.add_exemplars(await store.append_learned([], records[start : start + size]))
        route, _ = await registry.route("ts", REQUEST, 3)
        restored = await ToolRegistry.restore(store, Words(), config)
        again, _ = await restored.route("ts", REQUEST, 3)
        return registry.untrusted_route("ts"), route, restored.untrusted_route("ts"), again

    return asyncio.run(run())


def descriptions_only(tmp_path):
    return routed(tmp_path, [])[1]


def test_without_trusted_uses_untrusted_exemplars_do_not_route(tmp_path):
    adopted, route, adopted_again, again = routed(tmp_path / "a", untrusted("send_email", 12))
    assert not adopted and not adopted_again
    assert route.candidates == again.candidates == descriptions_only(tmp_path / "b").candidates


def test_untrusted_exemplars_that_held_back_trusted_uses_confirm_route(tmp_path):
    exemplars = untrusted("get_weather", 12) + trusted(HELD_BACK_SEQUENCES)
    adopted, route, adopted_again, again = routed(tmp_path, exemplars)
    assert adopted and adopted_again and route.top1 == "get_weather"
    assert route.candidates == again.candidates


def test_untrusted_exemplars_that_held_back_trusted_uses_contradict_do_not_route(tmp_path):
    exemplars = untrusted("send_email", 12) + trusted(FOLDED_SEQUENCES + HELD_BACK_SEQUENCES)
    adopted, route, adopted_again, again = routed(tmp_path, exemplars)
    assert not adopted and not adopted_again
    assert route.top1 == "get_weather" and route.candidates == again.candidates


def test_too_few_held_back_uses_validate_nothing(tmp_path):
    exemplars = untrusted("get_weather", 12) + trusted(HELD_BACK_SEQUENCES[:-1])
    assert routed(tmp_path, exemplars)[0] is False


def test_the_validation_counts_top1_hits_of_the_held_back_uses():
    east, north = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    right = CentroidBank(["a", "b"], [east, north])
    wrong = CentroidBank(["a", "b"], [north, east])
    uses = [("a", east), ("b", north)]
    assert right.top1_hits(uses) == 2 and wrong.top1_hits(uses) == 0
    assert untrusted_labels_validate(wrong, right, uses, 2) and not untrusted_labels_validate(
        right, wrong, uses, 2
    )
    assert untrusted_labels_validate(right, right, uses, 2)  # no worse is enough
    assert not untrusted_labels_validate(wrong, right, uses, 3)


def test_free_and_teacher_exemplars_and_evicted_uses_are_the_same_after_a_restart(tmp_path):
    """Both untrusted tiers of one tool, and trusted uses beyond what a tool keeps (the held-back
    ones among them evicted with it), as a live process and a restarted one hold them."""
    teacher = [(200 + i, "get_weather", LabelTier.TEACHER) for i in range(6)]
    many = trusted(range(1, 41))  # 20 held back, 20 folded; a tool keeps its latest 12
    exemplars = untrusted("get_weather", 6) + teacher + many
    adopted, route, adopted_again, again = routed(
        tmp_path, exemplars, batches=4, max_exemplars_per_tool=12, untrusted_validation_uses=6
    )
    assert adopted and adopted_again and route.candidates == again.candidates
    short = routed(
        tmp_path / "b", exemplars, batches=4, max_exemplars_per_tool=12, untrusted_validation_uses=7
    )
    assert short[0] is False and short[2] is False  # 6 held-back uses kept, not 7
