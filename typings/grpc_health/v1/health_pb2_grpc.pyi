from typing import Any, Final

import grpc

GRPC_GENERATED_VERSION: Final[str]
GRPC_VERSION: Final[str]

class HealthStub:
    # A blocking or an asyncio multicallable, as the channel is.
    Check: Any
    Watch: Any
    def __init__(self, channel: grpc.Channel | grpc.aio.Channel) -> None: ...

class HealthServicer:
    def Check(self, request, context): ...
    def Watch(self, request, context): ...

def add_HealthServicer_to_server(servicer, server) -> None: ...

class Health:
    @staticmethod
    def Check(
        request,
        target,
        options=(),
        channel_credentials=None,
        call_credentials=None,
        insecure=False,
        compression=None,
        wait_for_ready=None,
        timeout=None,
        metadata=None,
    ): ...
    @staticmethod
    def Watch(
        request,
        target,
        options=(),
        channel_credentials=None,
        call_credentials=None,
        insecure=False,
        compression=None,
        wait_for_ready=None,
        timeout=None,
        metadata=None,
    ): ...
