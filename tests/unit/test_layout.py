"""The house rules that no linter checks: modules small enough to read whole."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "services" / "sounding"
MAX_LINES = 450


def test_no_module_is_longer_than_450_lines():
    generated = PACKAGE / "api"
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if generated not in path.parents and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules: {long}"
