"""Reading a domain's numeric `domain_parameters` (strings on the wire): a missing or empty one
takes its default; anything else must parse and lie in range, or InvalidArgument names it."""

from __future__ import annotations

import math
from collections.abc import Mapping

from sounding.runtime import errors


def integer(parameters: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = parameters.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise errors.InvalidArgument(
            f"{name} must be an integer in [{low}, {high}]", field=f"start.domain_parameters.{name}"
        )
    return value


def number(parameters: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    raw = parameters.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not low <= value <= high:
        raise errors.InvalidArgument(
            f"domain_parameters[{name!r}] must be a number in [{low}, {high}]",
            field=f"start.domain_parameters.{name}",
        )
    return value
