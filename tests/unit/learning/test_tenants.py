import asyncio

import pytest
from sounding.learning.tenants import TenantLearning, Tenants

pytestmark = pytest.mark.unit


def test_a_tenant_is_opened_once_and_a_failed_opening_is_tried_again():
    opened: list[str] = []

    async def open_tenant(tenant: str) -> TenantLearning:
        opened.append(tenant)
        await asyncio.sleep(0.01)
        if tenant == "flaky" and opened.count("flaky") == 1:
            raise OSError("the store is not reachable")
        return TenantLearning(
            retrieval=f"{tenant}-retrieval",
            inquiry=f"{tenant}-inquiry",
            tools=f"{tenant}-tools",
            corpus_inquiry=f"{tenant}-corpus-inquiry",
        )

    async def run():
        tenants = Tenants(open_tenant)
        first = await asyncio.gather(*(tenants.of("acme") for _ in range(5)), tenants.of("globex"))
        with pytest.raises(OSError):
            await tenants.of("flaky")
        flaky = await tenants.of("flaky")
        return first, flaky, await tenants.of("acme")

    first, flaky, again = asyncio.run(run())
    assert sorted(opened) == ["acme", "flaky", "flaky", "globex"]
    assert {t.retrieval for t in first} == {"acme-retrieval", "globex-retrieval"}
    assert flaky.retrieval == "flaky-retrieval" and again is first[0]
