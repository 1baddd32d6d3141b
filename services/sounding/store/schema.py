"""Table names and Arrow schemas."""

from __future__ import annotations

import re

import pyarrow as pa

COLLECTIONS_TABLE = "collections"
SESSIONS_TABLE = "inquiry_sessions"
SESSION_SETUPS_TABLE = "inquiry_session_setups"
CHUNKS_PREFIX = "chunks__"
TEXT_INDEX = "search_text_idx"
TEXT_COLUMN = "search_text"
COLLECTION_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

COLLECTIONS_SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("description", pa.string()),
        ("create_time_us", pa.int64()),
        ("embedding_model", pa.string()),
        ("embedding_dimension", pa.int32()),
        ("chunk_words", pa.int32()),
        ("chunk_overlap_words", pa.int32()),
    ]
)


# One row per inquiry session, written when it starts: what stays fixed (hypotheses, questions).
SESSION_SETUPS_SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("domain", pa.string()),
        ("setup_json", pa.string()),
        ("create_time_us", pa.int64()),
    ]
)

# Append-only: one row per saved step; a session's state is its row with the highest step.
SESSIONS_SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("step", pa.int64()),
        ("domain", pa.string()),
        ("state_json", pa.string()),
        ("update_time_us", pa.int64()),
    ]
)


def chunks_table(collection: str) -> str:
    return CHUNKS_PREFIX + collection


def chunks_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            ("chunk_id", pa.string()),
            ("document_id", pa.string()),
            ("chunk_index", pa.int32()),
            ("title", pa.string()),
            ("text", pa.string()),
            # Title and chunk text: what is embedded and full-text indexed.
            ("search_text", pa.string()),
            ("metadata_json", pa.string()),
            ("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


def chunk_id(document_id: str, index: int) -> str:
    return f"{document_id}#{index}"


def sql_string(value: str) -> str:
    """A SQL string literal for LanceDB filters."""
    return "'" + value.replace("'", "''") + "'"
