import asyncio

import pytest
from sounding.store import schema
from sounding.store.collections import Store
from sounding.store.learning import LearningLog
from sounding.store.location import StoreLocation

pytestmark = pytest.mark.unit


def test_keys_keep_the_default_tenants_bare_names_and_qualify_the_others():
    assert schema.scoped("default", "docs") == "docs"
    assert schema.scoped("acme", "docs") == "acme.docs"
    assert [schema.public_name(k) for k in ("docs", "acme.docs")] == ["docs", "docs"]
    assert [schema.tenant_of(k) for k in ("docs", "acme.docs")] == ["default", "acme"]
    # An id with a '.' could name another tenant's key: it names no session.
    assert schema.session_key("default", "acme.1234") is None
    assert schema.session_key("acme", "1234") == "acme.1234"


def test_collections_of_the_same_name_in_two_tenants_are_two_and_listed_apart(tmp_path):
    async def run():
        store = await Store.open(StoreLocation(str(tmp_path)))
        for key in ("docs", "acme.docs", "acme.notes", "globex.docs"):
            await store.create_collection(key, "", "m", 4, 100, 10)
        listed = {
            tenant: [c.name for c in await store.list_collections(tenant)]
            for tenant in ("default", "acme", "globex", "initech")
        }
        after = [c.name for c in await store.list_collections("acme", start_after="acme.docs")]
        await store.delete_collection("acme.docs")
        remaining = [c.name for c in await store.list_collections()]
        reopened = [c.name for c in await (await Store.open(StoreLocation(str(tmp_path)))).list_collections()]
        return listed, after, remaining, reopened

    listed, after, remaining, reopened = asyncio.run(run())
    assert listed == {
        "default": ["docs"],
        "acme": ["acme.docs", "acme.notes"],
        "globex": ["globex.docs"],
        "initech": [],
    }
    assert after == ["acme.notes"]
    # Opening the store drops chunk tables nobody registered: the tenants' tables are registered.
    assert remaining == reopened == ["acme.notes", "docs", "globex.docs"]


def test_each_tenants_learning_log_is_its_own(tmp_path):
    async def run():
        acme = await LearningLog.open(StoreLocation(str(tmp_path)), tenant="acme")
        globex = await LearningLog.open(StoreLocation(str(tmp_path)), tenant="globex")
        default = await LearningLog.open(StoreLocation(str(tmp_path)))
        await acme.append_calibration("miss_rate", 1, {"a": 1.0}, {})
        return [await log.latest_calibration("miss_rate") for log in (acme, globex, default)]

    acme, globex, default = asyncio.run(run())
    assert acme == (1, {"a": 1.0}) and globex is None and default is None
