"""The audit log: one structured line per call of a method that can change what is stored (every
method whose role is above `reader`, and the reads that teach the tenant's learners: Retrieve
records the retrieval and the selector's plan, Inquire saves its session and what a corpus
inquiry learned; `rpc.CallPolicy.audited`), refused calls included, with the tenant, role,
method, resource, messages received and outcome. Logger `sounding.serving.audit`; the line is
`audit {json}` so that log pipelines can parse it. Never holds request contents beyond the names
of the resources touched. Calls refused for want of a valid token (no caller known) are logged
at most `MAX_ANONYMOUS_PER_S` a second, so that such callers cannot fill the log; the next line
logged says how many were left out (`left_out`)."""

from __future__ import annotations

import json
import logging
import time

from sounding.serving.auth import Principal

log = logging.getLogger("sounding.audit")

# Request fields naming the resource a call touches, as they are called in the protos, and the
# kind of resource each names.
RESOURCE_FIELDS = {"name": "collection", "collection": "collection", "toolset": "toolset"}
MAX_RESOURCE_CHARS = 256
MAX_ANONYMOUS_PER_S = 10


class _Throttle:
    """At most `per_s` lines in each second; how many were left out since the last one logged."""

    def __init__(self, per_s: int):
        self._per_s = per_s
        self._second = 0
        self._logged = 0
        self.left_out = 0

    def allows(self) -> bool:
        second = int(time.monotonic())
        if second != self._second:
            self._second, self._logged = second, 0
        if self._logged >= self._per_s:
            self.left_out += 1
            return False
        self._logged += 1
        return True


_anonymous = _Throttle(MAX_ANONYMOUS_PER_S)


def _resource(message) -> str:
    fields = message.DESCRIPTOR.fields_by_name
    parts = [
        f"{kind}={getattr(message, name)[:MAX_RESOURCE_CHARS]}"
        for name, kind in RESOURCE_FIELDS.items()
        if name in fields and isinstance(getattr(message, name), str) and getattr(message, name)
    ]
    start = getattr(message, "start", None) if "start" in fields else None
    if start is not None and message.HasField("start") and start.domain_parameters.get("collection"):
        parts.append(f"collection={start.domain_parameters['collection'][:MAX_RESOURCE_CHARS]}")
    if "resume" in fields and message.HasField("resume"):
        parts.append(f"session={message.resume.session_id[:MAX_RESOURCE_CHARS]}")
    target = fields.get("target")
    if target is not None and target.enum_type is not None:
        value = target.enum_type.values_by_number.get(message.target)
        parts.append(f"target={value.name if value is not None else message.target}")
    return " ".join(parts)


class AuditRecord:
    """What one call did; `emit` writes its line."""

    def __init__(self, method: str):
        self.method = method
        self.principal: Principal | None = None
        self.resource = ""
        self.messages = 0
        self.outcome = "UNKNOWN"

    def note(self, message) -> None:
        """A request message received (the first one names the resource)."""
        if not self.messages:
            self.resource = _resource(message)
        self.messages += 1

    def emit(self) -> None:
        if self.principal is None and not _anonymous.allows():
            return
        line = {
            "tenant": self.principal.tenant if self.principal else None,
            "role": self.principal.role if self.principal else None,
            "method": self.method,
            "resource": self.resource,
            "messages": self.messages,
            "outcome": self.outcome,
        }
        if self.principal is None and _anonymous.left_out:
            line["left_out"], _anonymous.left_out = _anonymous.left_out, 0
        log.info("audit %s", json.dumps(line, sort_keys=True))
