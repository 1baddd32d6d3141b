"""The README's "Limits" table is `sounding limits --markdown`: every limit, its default, its
setting, and nothing else."""

from pathlib import Path

import pytest
from sounding.settings.limits import LimitsSettings, limit_rows

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_lists_every_limit_with_its_default_and_setting():
    lines = README.read_text().splitlines()
    start = lines.index("| setting | default | what it bounds |")
    table = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append(line)
    expected = [
        f"| `{setting}` | {default} | {description} |"
        for setting, default, _, description in limit_rows(LimitsSettings())
    ]
    assert table == expected


def test_every_limit_is_settable_from_the_environment(monkeypatch):
    from sounding.settings.config import Settings

    changed = {}
    for setting, default, _, _ in limit_rows(LimitsSettings()):
        number = default.replace(",", "")
        changed[setting] = str(int(number) + 1) if number.isdigit() else str(float(number) + 0.5)
        monkeypatch.setenv(setting, changed[setting])
    shown = {setting: value.replace(",", "") for setting, _, value, _ in limit_rows(Settings().limits)}
    assert {s: float(v) for s, v in shown.items()} == {s: float(v) for s, v in changed.items()}
