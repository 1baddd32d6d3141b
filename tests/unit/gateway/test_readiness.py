import asyncio

import pytest
from grpc_health.v1 import health, health_pb2
from sounding.gateway.readiness import Readiness

pytestmark = pytest.mark.unit

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def until(condition, timeout_s: float = 60.0) -> None:
    """Waits for `condition` (whatever the machine's speed; a minute means it never came)."""
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.005)


class Peer:
    def __init__(self, up: bool):
        self.up = up
        self.probed = 0

    async def __call__(self):
        self.probed += 1
        if not self.up:
            raise ConnectionError("down")


def test_not_serving_until_every_probe_answers_then_again_while_one_does_not_and_once_draining():
    async def run():
        servicer = health.aio.HealthServicer()
        sidecar, workers = Peer(False), Peer(True)
        readiness = Readiness(servicer, ["svc"], {"sidecar": sidecar, "workers": workers}, interval_s=0.02)
        starting = asyncio.ensure_future(readiness.start())
        await until(lambda: sidecar.probed >= 3)  # probed and found down, again and again
        seen = [readiness.status, starting.done()]
        sidecar.up = True
        await starting
        seen.append(readiness.status)
        workers.up = False
        await until(lambda: readiness.status == NOT_SERVING)
        seen.append(readiness.status)
        workers.up = True
        await until(lambda: readiness.status == SERVING)
        seen.append(readiness.status)
        await readiness.drain()
        seen.append(readiness.status)
        return seen

    assert asyncio.run(run()) == [NOT_SERVING, False, SERVING, NOT_SERVING, SERVING, NOT_SERVING]
