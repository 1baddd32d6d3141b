"""Who owns what is stored (README, "Security"): every collection and inquiry session belongs to a
tenant, and the store knows it only by a `ResourceRef`, made once where a request names it.

A reference's store key is `<tenant>.<name>` for every tenant, the default one included, and a
tenant's copy of a learning table is named `<table>.<tenant>`. Neither a tenant nor a name may
hold a '.', and the reference refuses one that does when it is made, so no name a tenant can
send is another tenant's key: the wall holds by construction, not by a pattern on some fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sounding.runtime import errors

DEFAULT_TENANT = "default"
TENANT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
_TENANT = re.compile(TENANT_PATTERN)
_NAME = re.compile(NAME_PATTERN)
NAME_RULE = "1-64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"


def is_tenant(tenant: str) -> bool:
    return bool(_TENANT.match(tenant))


def is_name(name: str) -> bool:
    return bool(_NAME.match(name))


def checked_name(name: str, field: str, what: str = "collection") -> str:
    """`name`, if a resource can be called that; InvalidArgument naming the request's field if not."""
    if not is_name(name):
        raise errors.InvalidArgument(f"{what} names are {NAME_RULE}; got {name[:80]!r}", field=field)
    return name


@dataclass(frozen=True, slots=True)
class ResourceRef:
    """A tenant's collection or inquiry session called `name`. Both parts are checked when it is
    made (ValueError otherwise; `named` turns that into InvalidArgument naming the field)."""

    tenant: str
    name: str

    def __post_init__(self) -> None:
        if not is_tenant(self.tenant):
            raise ValueError(f"not a tenant: {self.tenant[:80]!r}")
        if not is_name(self.name):
            raise ValueError(f"not a name: {self.name[:80]!r}")

    @classmethod
    def named(cls, tenant: str, name: str, field: str, what: str = "collection") -> ResourceRef:
        """The tenant's `what` called `name`, as a request's `field` named it; InvalidArgument
        naming the field when the name cannot be one."""
        return cls(tenant, checked_name(name, field, what))

    @classmethod
    def from_key(cls, key: str) -> ResourceRef:
        """The reference a store key was made from (ValueError for a string no reference makes)."""
        tenant, dot, name = key.partition(".")
        if not dot:
            raise ValueError(f"not a store key: {key[:160]!r}")
        return cls(tenant, name)

    @property
    def key(self) -> str:
        """The store's key of the resource: unique across tenants."""
        return f"{self.tenant}.{self.name}"


def tenant_table(table: str, tenant: str) -> str:
    """The name of a tenant's copy of a learning table."""
    if not is_tenant(tenant):
        raise ValueError(f"not a tenant: {tenant[:80]!r}")
    return f"{table}.{tenant}"
