"""Who is calling: bearer tokens mapped to a tenant and a role (README, "Security").

Tokens are stored as the SHA-256 of the token (they are random 256-bit strings made by
`sounding token create`, so a fast hash is enough), in a TOML file of `[[tokens]]` tables or in
the `SOUNDING_AUTH__TOKENS` setting (JSON). The file is read again when it changes (checked at
most once a second, on a call or a health probe), so rotating a token needs no restart.
Revocation fails closed: a file that disappears, or no longer parses, refuses every token it
held until it is readable again (the log and the health status say so), unless
`keep_last_good` keeps the previous table in force.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import secrets
import time
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from sounding.runtime import errors
from sounding.settings.tokens import ROLES, Role, TokenEntry, TokenFile
from sounding.store.tenancy import DEFAULT_TENANT

log = logging.getLogger(__name__)

TOKEN_PREFIX = "snd_"
RELOAD_INTERVAL_S = 1.0


@dataclass(frozen=True)
class Principal:
    """The caller a call acts for."""

    tenant: str
    role: Role

    def may(self, role: Role) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)


# Every call when no tokens are configured (a developer's loopback server).
LOCAL = Principal(DEFAULT_TENANT, "admin")


def new_token() -> tuple[str, str]:
    """A fresh token and its SHA-256 (hex)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, hash_token(token)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def is_loopback(address: str) -> bool:
    """Whether a `host:port` server address listens on loopback only."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _table(entries: Iterable[TokenEntry]) -> dict[str, Principal]:
    return {entry.sha256: Principal(entry.tenant, entry.role) for entry in entries}


def read_token_file(path: Path) -> list[TokenEntry]:
    """The entries of a token file; ValueError naming the file (never its content) if invalid."""
    try:
        return TokenFile.model_validate(tomllib.loads(path.read_text())).tokens
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as error:
        raise ValueError(f"token file {path}: {type(error).__name__}: {_first_line(error)}") from None


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else ""


class Authenticator:
    """Maps a call's `authorization: Bearer <token>` metadata to its Principal.

    With no tokens configured (`enabled` is False), every call is `LOCAL`."""

    def __init__(
        self,
        entries: Iterable[TokenEntry] = (),
        tokens_file: Path | None = None,
        keep_last_good: bool = False,
    ):
        self._fixed = _table(entries)
        self._file = tokens_file
        self._keep_last_good = keep_last_good
        self._from_file: dict[str, Principal] = {}
        self._stamp: tuple | None = None
        self._checked = 0.0
        # Why the token file's tokens are refused, while it is unreadable.
        self.problem: str | None = None
        if tokens_file is not None:
            self._from_file = _table(read_token_file(tokens_file))
            self._stamp = _file_stamp(tokens_file)
            self._checked = time.monotonic()

    @property
    def enabled(self) -> bool:
        return bool(self._fixed) or self._file is not None

    def authenticate(self, metadata: Iterable[tuple[str, str | bytes]] | Mapping | None) -> Principal:
        """The caller, or Unauthenticated (no token, a malformed one, or one not configured)."""
        if not self.enabled:
            return LOCAL
        self._reload_if_changed()
        token = _bearer(metadata)
        if token is None:
            raise errors.Unauthenticated(
                "this server requires a bearer token in the `authorization` metadata",
                reason="MISSING_TOKEN",
            )
        digest = hash_token(token)
        principal = self._from_file.get(digest) or self._fixed.get(digest)
        if principal is None:
            raise errors.Unauthenticated("the bearer token is not valid", reason="INVALID_TOKEN")
        return principal

    async def check(self) -> None:
        """A readiness probe: raises while the token file is unreadable and its tokens refused."""
        self._reload_if_changed()
        if self.problem is not None:
            raise RuntimeError(self.problem)

    def _reload_if_changed(self) -> None:
        if self._file is None or time.monotonic() - self._checked < RELOAD_INTERVAL_S:
            return
        self._checked = time.monotonic()
        try:
            stamp = _file_stamp(self._file)
            if stamp == self._stamp and self.problem is None:
                return
            self._from_file = _table(read_token_file(self._file))
            self._stamp, self.problem = stamp, None
            log.info("token file %s reloaded: %d tokens", self._file, len(self._from_file))
        except (OSError, ValueError) as error:
            if self._keep_last_good:
                log.error("token file not reloaded; its last good tokens stay in force: %s", error)
                return
            if self.problem is None:
                log.error("token file unreadable; every token it held is refused until it reads: %s", error)
            self._from_file, self._stamp = {}, None
            self.problem = f"the token file is unreadable: {type(error).__name__}"


def _file_stamp(path: Path) -> tuple:
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def has_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> bool:
    """Whether the call's metadata carries an `authorization` value at all."""
    return any(key == "authorization" for key, _ in metadata or ())


def _bearer(metadata) -> str | None:
    for key, value in metadata or ():
        if key == "authorization":
            scheme, _, token = (value if isinstance(value, str) else value.decode("latin-1")).partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


def authorize(principal: Principal, role: Role, method: str) -> None:
    """PermissionDenied unless `principal`'s role includes `role`."""
    if not principal.may(role):
        raise errors.PermissionDenied(
            f"{method} needs the role {role!r}; the token's role is {principal.role!r}",
            reason="ROLE_NOT_ALLOWED",
        )
