"""A gRPC call made with a bare HTTP/2 client (h2), for what grpc's own clients refuse to send:
header values that are not UTF-8."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import h2.config
import h2.connection
import h2.events


def call(
    address: str,
    path: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    ca_file: Path | None = None,
) -> dict[bytes, bytes]:
    """One unary call of `path` at `address` (`host:port`; TLS when `ca_file` is given) with the
    extra `headers` and the serialized request `body`; the response's headers and trailers."""
    host, port = address.rsplit(":", 1)
    sock: socket.socket = socket.create_connection((host, int(port)), timeout=20)
    if ca_file is not None:
        context = ssl.create_default_context(cafile=str(ca_file))
        context.set_alpn_protocols(["h2"])
        sock = context.wrap_socket(sock, server_hostname=host)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    connection.initiate_connection()
    request = [
        (b":method", b"POST"),
        (b":scheme", b"https" if ca_file else b"http"),
        (b":path", path.encode()),
        (b":authority", address.encode()),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
        *headers,
    ]
    connection.send_headers(1, request)
    connection.send_data(1, b"\x00" + len(body).to_bytes(4, "big") + body, end_stream=True)
    sock.sendall(connection.data_to_send())
    received: dict[bytes, bytes] = {}
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return received
            for event in connection.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
                    received.update(dict(event.headers))
                if isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                    return received
            sock.sendall(connection.data_to_send())
    finally:
        sock.close()
