import json
import logging

import pytest
from sounding.serving.audit import AuditRecord
from sounding.serving.auth import Principal
from sounding_api.sounding.v1 import corpus_pb2, sounding_pb2

pytestmark = pytest.mark.unit


def test_a_record_names_the_resource_even_of_a_request_with_an_unknown_enum_value(caplog):
    calibrate = sounding_pb2.CalibrateRequest.FromString(bytes.fromhex("08ffffffffffffffffff01"))
    with caplog.at_level(logging.INFO, logger="sounding.audit"):
        for method, request in (
            ("Calibrate", calibrate),
            ("DeleteCollection", corpus_pb2.DeleteCollectionRequest(name="docs")),
        ):
            record = AuditRecord(method)
            record.principal = Principal("acme", "admin")
            record.note(request)
            record.outcome = "OK"
            record.emit()
    lines = [json.loads(r.getMessage().removeprefix("audit ")) for r in caplog.records]
    assert [(line["method"], line["resource"], line["tenant"]) for line in lines] == [
        ("Calibrate", "target=-1", "acme"),
        ("DeleteCollection", "collection=docs", "acme"),
    ]


def test_calls_without_a_known_caller_are_logged_at_most_ten_a_second(caplog, monkeypatch):
    from sounding.serving import audit

    clock = [100.0]
    monkeypatch.setattr(audit.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(audit, "_anonymous", audit._Throttle(audit.MAX_ANONYMOUS_PER_S))
    with caplog.at_level(logging.INFO, logger="sounding.audit"):
        for _ in range(25):
            refused = AuditRecord("sounding.v1.SoundingService/Retrieve")
            refused.outcome = "UNAUTHENTICATED"
            refused.emit()
        known = AuditRecord("sounding.v1.SoundingService/Retrieve")
        known.principal = Principal("acme", "reader")
        known.outcome = "OK"
        known.emit()  # a known caller's line is never left out
        clock[0] = 101.0
        refused.emit()
    lines = [json.loads(r.getMessage().removeprefix("audit ")) for r in caplog.records]
    assert [line["tenant"] for line in lines] == [None] * 10 + ["acme", None]
    assert lines[-1]["left_out"] == 15 and "left_out" not in lines[0]
