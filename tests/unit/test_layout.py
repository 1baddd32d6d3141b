"""The house rules that no linter checks: modules small enough to read whole, and every unit
test file marked `unit` (the newer Pythons run `-m unit` only)."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

UNIT_TESTS = Path(__file__).resolve().parent
ROOT = UNIT_TESTS.parents[1]
PACKAGES = (ROOT / "services" / "sounding", ROOT / "bench" / "sounding_bench")
MAX_LINES = 450


def test_no_module_is_longer_than_450_lines():
    generated = ROOT / "services" / "sounding" / "api"
    long = {
        str(path.relative_to(ROOT)): lines
        for package in PACKAGES
        for path in package.rglob("*.py")
        if generated not in path.parents and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules: {long}"


def test_every_unit_test_file_is_marked_unit():
    unmarked = [
        str(path.relative_to(UNIT_TESTS))
        for path in UNIT_TESTS.rglob("test_*.py")
        if "pytest.mark.unit" not in path.read_text()
    ]
    assert not unmarked, f"mark these `pytestmark = pytest.mark.unit`: {unmarked}"
