"""Channel credentials from a token and TLS files (README, "Security")."""

from __future__ import annotations

from os import PathLike
from pathlib import Path

import grpc

PathType = str | PathLike[str]


def _read(path: PathType | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


def channel_credentials(
    token: str | None = None,
    ca_file: PathType | None = None,
    cert_file: PathType | None = None,
    key_file: PathType | None = None,
) -> grpc.ChannelCredentials | None:
    """Credentials for a channel to Sounding: TLS verified against `ca_file` when it is given
    (with `cert_file` and `key_file`, the client certificate a mutual-TLS server asks for), and
    `token` sent as `authorization: Bearer <token>` on every call. None: a plaintext channel
    without a token. A token without TLS is sent only to a loopback address (grpc's local
    credentials refuse any other)."""
    if (cert_file is None) != (key_file is None):
        raise ValueError("a client certificate needs both cert_file and key_file")
    if ca_file is None:
        if cert_file is not None:
            raise ValueError("a client certificate needs ca_file (TLS) as well")
        if not token:
            return None
        transport = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
    else:
        transport = grpc.ssl_channel_credentials(_read(ca_file), _read(key_file), _read(cert_file))
    if not token:
        return transport
    return grpc.composite_channel_credentials(transport, grpc.access_token_call_credentials(token))
