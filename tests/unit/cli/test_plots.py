import io

import pytest
from sounding.cli.plots import calibration_png
from sounding_client import CalibrationCurve

pytestmark = pytest.mark.unit


def test_a_report_s_curves_are_drawn_as_one_png():
    curves = [
        CalibrationCurve("perfect", "stated", "observed", (0.0, 1.0), (0.0, 1.0)),
        CalibrationCurve("miss rate, stated", "stated", "observed", (0.1, 0.4, 0.8), (0.2, 0.5, 0.9)),
    ]
    png = calibration_png(curves, "reliability")
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size == (495, 405)  # 5.5 x 4.5 inches at 90 dpi


def test_a_report_without_curves_is_refused():
    with pytest.raises(ValueError, match="no curves"):
        calibration_png([], "bandit")
