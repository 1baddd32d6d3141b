#!/usr/bin/env python3
"""The blocking Python client, generated from the asyncio one (the `unasync` approach).

clients/python/sounding_client/_async_client.py is written by hand; _sync_client.py is what this
makes of it by a token-level rewrite: `async` and `await` dropped, the names of SYNC_NAMES given
their blocking spelling and the module docstring replaced by GENERATED_DOCSTRING; ruff then sorts
the imports, turns `for x in y: yield x` into `yield from y` (UP028, what `async for` cannot
say) and formats the result. An asyncio name missing from SYNC_NAMES stops the rewrite.

    python tools/generate_sync_client.py           # writes _sync_client.py
    python tools/generate_sync_client.py --check   # writes nothing; fails on a difference (make lint)
"""

from __future__ import annotations

import argparse
import difflib
import functools
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "clients" / "python" / "sounding_client"
SOURCE = PACKAGE / "_async_client.py"
GENERATED = PACKAGE / "_sync_client.py"
GENERATED_DOCSTRING = '''"""Generated from _async_client.py by `python tools/generate_sync_client.py`:
do not edit. The blocking `Client` and `Inquiry`, twins of `AsyncClient` and `AsyncInquiry` (see
there); `make lint` fails when this file is not what the script makes of _async_client.py.
"""'''
# An asyncio name -> its blocking spelling.
SYNC_NAMES = {
    "AsyncClient": "Client",
    "AsyncInquiry": "Inquiry",
    "AsyncConnection": "Connection",
    "AsyncIterator": "Iterator",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "asyncio": "queue",  # asyncio.Queue -> queue.Queue
}
DROPPED = {"async", "await"}
# A name that has an asyncio spelling, so needs a blocking one.
ASYNCIO_NAME = re.compile(r"async|aio|^__a(enter|exit|iter|next)__$", re.IGNORECASE)


def rewritten(source: str) -> str:
    """`source` with `async` and `await` dropped, SYNC_NAMES renamed and GENERATED_DOCSTRING for
    its module docstring; ValueError names an asyncio name SYNC_NAMES has no spelling for."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    docstring = next(t for t in tokens if t.type not in (tokenize.COMMENT, tokenize.NL))
    if docstring.type != tokenize.STRING:
        raise ValueError("the source has no module docstring to replace")
    edits: list[tuple[int, int, str]] = []  # (start offset, end offset, replacement)
    for token, following in zip(tokens, tokens[1:], strict=False):
        start = starts[token.start[0] - 1] + token.start[1]
        end = starts[token.end[0] - 1] + token.end[1]
        if token is docstring:
            edits.append((start, end, GENERATED_DOCSTRING))
        elif token.type != tokenize.NAME:
            continue
        elif token.string in DROPPED:  # with the space after it
            edits.append((start, starts[following.start[0] - 1] + following.start[1], ""))
        elif token.string in SYNC_NAMES:
            edits.append((start, end, SYNC_NAMES[token.string]))
        elif ASYNCIO_NAME.search(token.string):
            raise ValueError(
                f"line {token.start[0]}: {token.string!r} has no blocking spelling in SYNC_NAMES"
            )
    for start, end, replacement in reversed(edits):
        source = source[:start] + replacement + source[end:]
    return source


def formatted(code: str) -> str:
    """`code` with its imports sorted, its re-yielding loops as `yield from` and formatted, by ruff
    under the project's settings."""
    fix = ["check", "--fix", "--unsafe-fixes", "--select", "I,UP028", "--quiet"]
    for command in (fix, ["format", "--quiet"]):
        code = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", str(GENERATED), "-"],
            input=code,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    return code


@functools.cache
def generated() -> str:
    """What _sync_client.py should hold."""
    return formatted(rewritten(SOURCE.read_text()))


def drift(committed: str) -> str:
    """The difference between `committed` and what _sync_client.py should hold; '' for none."""
    return "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            generated().splitlines(keepends=True),
            str(GENERATED.relative_to(ROOT)),
            "generated from " + str(SOURCE.relative_to(ROOT)),
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description="Generate the blocking Python client from the asyncio one.")
    parser.add_argument("--check", action="store_true", help="fail, writing nothing, when the file differs")
    if parser.parse_args().check:
        difference = drift(GENERATED.read_text() if GENERATED.exists() else "")
        if difference:
            sys.stdout.write(difference)
            print(f"{GENERATED.name} is stale: run `python tools/generate_sync_client.py`", file=sys.stderr)
            return 1
        return 0
    GENERATED.write_text(generated())
    return 0


if __name__ == "__main__":
    sys.exit(main())
