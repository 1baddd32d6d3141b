"""The bearer-token table's schema (README, "Security"): each token's SHA-256, the tenant it acts
for and its role. `sounding.serving.auth` reads and applies it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from sounding.store.tenancy import TENANT_PATTERN

Role = Literal["reader", "writer", "admin"]
# Each role may do what the roles before it may.
ROLES: tuple[Role, ...] = ("reader", "writer", "admin")


class TokenEntry(BaseModel):
    """One token: its SHA-256 (hex), the tenant it acts for and its role."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    tenant: str = Field(pattern=TENANT_PATTERN)
    role: Role


class TokenFile(BaseModel):
    tokens: list[TokenEntry] = []
