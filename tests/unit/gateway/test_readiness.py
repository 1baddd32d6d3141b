import asyncio

import pytest
from grpc_health.v1 import health, health_pb2
from sounding.gateway.readiness import Readiness

pytestmark = pytest.mark.unit

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Peer:
    def __init__(self, up: bool):
        self.up = up

    async def __call__(self):
        if not self.up:
            raise ConnectionError("down")


def test_not_serving_until_every_probe_answers_then_again_while_one_does_not_and_once_draining():
    async def run():
        servicer = health.aio.HealthServicer()
        sidecar, workers = Peer(False), Peer(True)
        readiness = Readiness(servicer, ["svc"], {"sidecar": sidecar, "workers": workers}, interval_s=0.02)
        starting = asyncio.ensure_future(readiness.start())
        await asyncio.sleep(0.1)
        seen = [readiness.status]
        sidecar.up = True
        await starting
        seen.append(readiness.status)
        workers.up = False
        await asyncio.sleep(0.1)
        seen.append(readiness.status)
        workers.up = True
        await asyncio.sleep(0.1)
        seen.append(readiness.status)
        await readiness.drain()
        seen.append(readiness.status)
        return seen

    assert asyncio.run(run()) == [NOT_SERVING, SERVING, NOT_SERVING, SERVING, NOT_SERVING]
