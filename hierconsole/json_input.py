"""JSON input files (a model config, CUB class aliases), read with one error style: which file, what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hierconsole.bounded_input import read_document
from hierconsole.errors import InputError


def read_json(path: Path, what: str, hint: str, kind: str) -> Any:
    """The value a UTF-8 JSON file holds; any file that is not one (unreadable, not UTF-8, not JSON, nested
    deeper than the parser recurses, larger than `bounded_input.MAX_DOCUMENT_BYTES`) is an InputError
    naming `path`, saying what `what` should be by `hint`; `kind` names such a file ("a model config")
    in the size bound's line."""
    try:
        return json.loads(read_document(path, kind).decode("utf-8"))
    except OSError as exc:
        raise InputError(path, f"cannot read {what}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON: {exc}", hint=hint) from None
    except UnicodeDecodeError as exc:  # JSON is UTF-8 text: a binary file (or another encoding) is not one
        raise InputError(path, f"not UTF-8 text: {exc}", hint=hint) from None
    except RecursionError:  # json parses nested arrays and objects recursively
        raise InputError(path, "not valid JSON: arrays or objects nested too deeply", hint=hint) from None
