"""What the harnesses that run a stack of their own share: a clean learning log before the
stack starts, and writing a result (JSON, with its plot beside it as PNG)."""

from __future__ import annotations

import json
from pathlib import Path

from sounding.config import Settings


def empty_learning_log(settings: Settings, include_calibrations: bool = False) -> None:
    """Drop the learning tables (and the calibrations, if asked), so the stack about to start
    has a cold selector (and states uncalibrated values)."""
    import lancedb

    from sounding.store.learning import CALIBRATIONS_TABLE, OBSERVATIONS_TABLE, RETRIEVALS_TABLE

    if not Path(settings.store_uri).exists():
        return
    db = lancedb.connect(settings.store_uri)
    existing = set(db.table_names(limit=100_000))
    tables = (RETRIEVALS_TABLE, OBSERVATIONS_TABLE, *((CALIBRATIONS_TABLE,) if include_calibrations else ()))
    for name in tables:
        if name in existing:
            db.drop_table(name)


def write(result: dict, plot: bytes, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".png").write_bytes(plot)
