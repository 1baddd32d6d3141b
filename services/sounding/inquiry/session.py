"""An inquiry session and how it is stored: its domain's setup as one JSON document, saved once
when it starts, and everything else as another, saved after every step (so a resumed session
continues exactly where it was)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields

from sounding.inquiry.protocol import Domain, Policy
from sounding.inquiry.registry import DOMAINS, DomainSpec


@dataclass(frozen=True)
class PendingQuestion:
    """The question the session asked and awaits the answer to."""

    question_id: str
    question: str
    predicted_gain: float
    cost: float


@dataclass(frozen=True)
class SessionAnswer:
    """How the session ended: its answer, the stopping reason, and whether it was forced."""

    answer: str
    reason: str
    forced: bool


@dataclass
class Session:
    session_id: str
    domain: str
    policy: Policy
    # The domain's own JSON (`Domain.setup` and `Domain.state`).
    domain_setup: dict
    domain_state: dict
    turn: int = 0
    pending: PendingQuestion | None = None
    cost_spent: float = 0.0
    entropy_path: list[float] = field(default_factory=list)
    predicted_gains: list[float] = field(default_factory=list)
    actual_gains: list[float] = field(default_factory=list)
    answer: SessionAnswer | None = None
    # Number of times the session was saved; the store keeps the latest.
    saves: int = 0
    # The live domain object, rebuilt from setup and state only when a session is loaded.
    live: Domain | None = field(default=None, repr=False, compare=False)

    @property
    def spec(self) -> DomainSpec:
        """The session's domain as registered."""
        return DOMAINS[self.domain]

    def setup_json(self) -> str:
        return json.dumps(self.domain_setup)

    def to_json(self) -> str:
        """Everything but the setup (see `setup_json`)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("domain_setup", "live")}
        data["policy"] = asdict(self.policy)
        data["policy"]["cost_budget"] = _finite_or_none(self.policy.cost_budget)
        data["pending"] = asdict(self.pending) if self.pending is not None else None
        data["answer"] = asdict(self.answer) if self.answer is not None else None
        return json.dumps(data)

    @classmethod
    def from_json(cls, setup_json: str, state_json: str) -> Session:
        data = json.loads(state_json)
        policy = data.pop("policy")
        if policy["cost_budget"] is None:
            policy["cost_budget"] = math.inf
        pending, answer = data.pop("pending"), data.pop("answer")
        return cls(
            policy=Policy(**policy),
            domain_setup=json.loads(setup_json),
            pending=PendingQuestion(**pending) if pending is not None else None,
            answer=SessionAnswer(**answer) if answer is not None else None,
            **data,
        )


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
