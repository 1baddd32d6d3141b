import pytest
from sounding.gateway.convert.learning import calibrate_response
from sounding.learning.protocol import CALIBRATION_TARGETS, CalibrationReport
from sounding_api.sounding.v1 import sounding_pb2

pytestmark = pytest.mark.unit


def test_every_calibration_target_has_its_report_converted():
    converted = {
        calibrate_response(CalibrationReport(target, 1, 50, True, "", {})).report.target
        for target in CALIBRATION_TARGETS
    }
    assert sounding_pb2.CALIBRATION_TARGET_CONFIDENCE in converted
    assert len(converted) == len(CALIBRATION_TARGETS)
