"""Calibration diagrams drawn from a CalibrationReport's curves (matplotlib: the [plot] extra);
the server sends points, its clients draw."""

from __future__ import annotations

import io
from collections.abc import Sequence

from sounding_client import CalibrationCurve


def calibration_png(curves: Sequence[CalibrationCurve], title: str) -> bytes:
    """The curves on one pair of axes (the first curve's labels), as a PNG."""
    if not curves:
        raise ValueError("the report has no curves to draw")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.5, 4.5))
    for curve in curves:
        marker = "o" if len(curve.x) > 2 else None
        axis.plot(curve.x, curve.y, marker=marker, markersize=3, linewidth=1, label=curve.name)
    axis.set_xlabel(curves[0].x_label)
    axis.set_ylabel(curves[0].y_label)
    axis.set_title(title)
    axis.legend(fontsize="small")
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return buffer.getvalue()
