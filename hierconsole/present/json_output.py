"""The JSON every `--json` option prints (and each line of `extract --progress json`): one shape version,
`schema`, at the top of each document, so a script can tell which shape it reads (README: JSON outputs)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

JSON_SCHEMA = 3
"""The version of the `--json` shapes; raise it, and say what changed in the README's list, whenever a
document's keys move or are added. 1: no `schema` field, `effects --json` held the effects at the top
level; 2: the effects under "effects" beside the arms, and `schema` in every document; 3: every paired
summary (effect, contrast row, pooled effect) carries the TOST's and the multiplicity family's keys."""
SCHEMA_KEY = "schema"


def json_text(doc: Mapping[str, Any], *, indent: int | None = 2, default: Callable[[Any], Any] | None = None) -> str:
    """`doc` with `schema` as its first key, as one JSON text ending in a newline."""
    return json.dumps({SCHEMA_KEY: JSON_SCHEMA, **doc}, indent=indent, default=default) + "\n"
