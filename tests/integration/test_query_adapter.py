"""Calibrate(QUERY_ADAPTER) on a collection built here: agents asking what an animal eats always
use its habitat page, which the base embeddings rank below its diet page."""

import grpc
import pytest
from sounding_client import CalibrationReport, Final, Plan, RetrievalOutcome, SoundingError

pytestmark = pytest.mark.integration

ANIMALS = {
    "otter": ("fish, crabs and frogs", "rivers, lakes and rocky coasts"),
    "badger": ("earthworms, insects and bulbs", "woodland setts dug into hillsides"),
    "puffin": ("sand eels and small fish", "cliff-top burrows on northern islands"),
    "koala": ("eucalyptus leaves", "eucalyptus forests of eastern Australia"),
    "camel": ("desert grasses and thorny shrubs", "hot deserts of Arabia and the Sahara"),
    "penguin": ("krill, squid and fish", "Antarctic ice shelves and cold southern coasts"),
    "beaver": ("bark, twigs and water plants", "ponds behind dams it builds from branches"),
    "panda": ("bamboo shoots and leaves", "misty mountain bamboo forests of China"),
    "hedgehog": ("beetles, caterpillars and slugs", "hedgerows, gardens and leaf piles"),
    "walrus": ("clams and other shellfish", "Arctic sea ice and gravel beaches"),
    "flamingo": ("brine shrimp and blue-green algae", "salt lagoons and alkaline lakes"),
    "squirrel": ("acorns, nuts and seeds", "tree dreys in oak and pine woods"),
    "bat": ("moths, mosquitoes and fruit", "caves, attics and hollow trees"),
    "owl": ("mice, voles and shrews", "barns, church towers and old trees"),
    "giraffe": ("acacia leaves from tall trees", "open savanna of eastern Africa"),
    "salmon": ("insects, shrimp and smaller fish", "cold rivers and the open north Atlantic"),
    "gorilla": ("stems, fruit and wild celery", "tropical mountain rainforests"),
    "hummingbird": ("flower nectar and tiny insects", "forest edges and flowering gardens of the Americas"),
    "lobster": ("crabs, clams and sea urchins", "rocky crevices on the cold sea floor"),
    "yak": ("tough mountain grasses and lichens", "high Himalayan plateaus above the tree line"),
}
TRAIN_PHRASINGS = ("what does the {} eat", "the diet of the {}", "food a {} feeds on")
NEW_PHRASING = "what is a {} fed on in the wild"


def documents():
    for animal, (food, place) in ANIMALS.items():
        yield {
            "id": f"{animal}-diet",
            "title": f"{animal} diet",
            "text": f"The {animal} eats {food}. Its diet is {food}.",
        }
        yield {
            "id": f"{animal}-habitat",
            "title": f"{animal} habitat",
            "text": f"The {animal} lives in {place}, where it shelters and raises its young.",
        }


def searched(client, collection: str, query: str, **options) -> tuple[int, list[str]]:
    """(the plan's query adapter version, the dense ranking's document ids)."""
    version, ranking = -1, []
    for event in client.retrieve(collection, query, top_k=40, arms=("dense",), omit_text=True, **options):
        if isinstance(event, Plan):
            version = event.query_adapter_version
        elif isinstance(event, Final):
            ranking = [h.document_id for h in event.hits]
    return version, ranking


def habitat_ranks(client, collection: str, **options) -> tuple[set[int], list[int]]:
    versions, ranks = set(), []
    for animal in ANIMALS:
        version, ranking = searched(client, collection, NEW_PHRASING.format(animal), **options)
        versions.add(version)
        ranks.append(ranking.index(f"{animal}-habitat"))
    return versions, ranks


def calibrate(client, **options) -> CalibrationReport:
    report = list(client.calibrate("query_adapter", **options))[-1]
    assert isinstance(report, CalibrationReport)
    return report


def refusal(client, **options) -> SoundingError:
    with pytest.raises(SoundingError) as refused:
        calibrate(client, **options)
    return refused.value


def test_a_query_adapter_learns_which_documents_agents_use_and_survives_a_restart(client, stack):
    client.create_collection("adapter-zoo")
    list(client.ingest("adapter-zoo", list(documents())))
    client.create_collection("adapter-untaught")
    list(client.ingest("adapter-untaught", list(documents())))

    missing = refusal(client)
    assert missing.code == grpc.StatusCode.INVALID_ARGUMENT
    assert missing.field_violations[0].field == "collection"
    assert refusal(client, collection="adapter-nowhere").code == grpc.StatusCode.NOT_FOUND
    too_few = refusal(client, collection="adapter-zoo")
    assert too_few.code == grpc.StatusCode.FAILED_PRECONDITION and too_few.reason == "TOO_FEW_OUTCOMES"

    base_versions, base_ranks = habitat_ranks(client, "adapter-zoo")
    assert base_versions == {0}
    outcomes = []
    for phrasing in TRAIN_PHRASINGS:
        for animal in ANIMALS:
            query = phrasing.format(animal)  # both arms named: the plan is the same in any test order
            final = client.retrieve_final(
                "adapter-zoo", query, top_k=2, arms=("dense", "lexical"), omit_text=True
            )
            habitat = f"{animal}-habitat"
            if habitat in [h.document_id for h in final.hits]:
                outcomes.append(RetrievalOutcome(final.retrieval_id, (habitat,)))
            else:  # what the agent needed and was not given counts as much as what it used
                outcomes.append(
                    RetrievalOutcome(
                        final.retrieval_id, found_missing_content=True, missed_document_ids=(habitat,)
                    )
                )
    assert any(o.missed_document_ids for o in outcomes) and any(o.used_document_ids for o in outcomes)
    assert client.observe(outcomes).recorded == len(outcomes)

    report = calibrate(client, collection="adapter-zoo")
    d = report.diagnostics
    assert report.deployed and report.version == "1" and report.sample_size == len(outcomes)
    assert d["holdout_size"] == 12 and d["training_size"] == 48 and d["pool_chunks"] == 2 * len(ANIMALS)
    assert d["holdout_ndcg_at_10_candidate"] > d["holdout_ndcg_at_10_base"]
    # The retrievals ran dense and lexical and logged their scores: the fusion, min-max or RRF,
    # and the dense arm's weight were chosen on all 12 held out.
    assert d["fusion_holdout_size"] == 12 and d["dense_fusion_weight"] in (1.0, 1.5, 2.0, 3.0, 4.0)
    assert {k for k in d if k.startswith(("holdout_min_max_", "holdout_fused_"))} == {
        f"holdout_{fusion}_ndcg_at_10_dense_weight_{w:g}"
        for fusion in ("min_max", "fused")
        for w in (1.0, 1.5, 2.0, 3.0, 4.0)
    }
    chosen = "min_max" if d["fusion_min_max"] == 1.0 else "fused"
    assert d[f"holdout_{chosen}_ndcg_at_10_dense_weight_{d['dense_fusion_weight']:g}"] == max(
        v for k, v in d.items() if k.startswith(("holdout_min_max_", "holdout_fused_"))
    )
    assert report.summary.startswith("deployed query adapter v1")

    # Queries phrased as none of the observed ones find the habitat page higher with the adapter.
    versions, ranks = habitat_ranks(client, "adapter-zoo")
    assert versions == {1}
    assert sum(ranks) < sum(base_ranks) and sum(r == 0 for r in ranks) > sum(r == 0 for r in base_ranks)
    assert habitat_ranks(client, "adapter-zoo", learned_ranking=False) == ({0}, base_ranks)
    # Another collection with the same documents learned nothing.
    assert habitat_ranks(client, "adapter-untaught") == ({0}, base_ranks)

    stack.kill_orchestrator()
    stack.start_orchestrator()
    assert habitat_ranks(client, "adapter-zoo") == ({1}, ranks)
