import json
import logging

import pytest
from sounding.audit import AuditRecord
from sounding.auth import Principal
from sounding_client.api.sounding.v1 import corpus_pb2, sounding_pb2

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
