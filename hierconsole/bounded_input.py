"""A user's files read within bounds: every reader of a user's text (CSV files, the CUB and NABirds lists,
taxonomies, checklists, aliases, model configs, TOML presets and families) reads through here.

A file with no line ends (`/dev/zero`, a binary file given for a CSV) or with no end at all would
otherwise be read whole into memory before any check could look at it: a line is read at most
MAX_LINE_BYTES at a time and a file at most its kind's bound, and past either the read stops with one
line naming the file (and the line) and the bound.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from hierconsole.errors import InputError

MAX_LINE_BYTES: Final = 1 << 20
"""The longest line of any text input: far above a real one (a CSV row, a list entry, a TOML line)."""
MAX_TEXT_BYTES: Final = 1 << 30
"""The largest line-by-line input (labels, image lists, checklists): millions of rows."""
MAX_DOCUMENT_BYTES: Final = 16 << 20
"""The largest file read whole (a TOML preset or family, a JSON model config or aliases): kilobytes in use."""
_CHUNK: Final = 1 << 16
_BOM: Final = codecs.BOM_UTF8


def _size(n: int) -> str:
    """1 MiB, 16 MiB, 1 GiB: a bound as a user reads it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"


def _too_long(path: Path, what: str, line: int) -> InputError:
    return InputError(
        path,
        f"line {line:,} is longer than {_size(MAX_LINE_BYTES)}, the most a line of {what} may hold",
        hint=f"is this {what}? a line that long is a binary file, a device or a file without line breaks",
    )


def _too_big(path: Path, what: str, limit: int) -> InputError:
    return InputError(
        path,
        f"the file is larger than {_size(limit)}, the most {what} may be",
        hint=f"is this {what}? give the file itself, not a device, a pipe or another kind of file",
    )


def byte_lines(path: Path, what: str, limit: int = MAX_TEXT_BYTES) -> Iterator[bytes]:
    """The lines of `path` as bytes (line ends kept; a leading UTF-8 BOM dropped), each at most
    MAX_LINE_BYTES and all together at most `limit` bytes; past either, an InputError naming the line.

    OSError (a missing or unreadable file) is the caller's to word, as its other errors are."""
    with Path(path).open("rb") as fh:
        total = 0
        for number, raw in enumerate(_any_line_ends(fh), start=1):
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):  # its end is further still
                raise _too_long(path, what, number)
            total += len(raw)
            if total > limit:
                raise _too_big(path, what, limit)
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            yield raw


_BARE_CR = re.compile(rb"(?<=\r)(?!\n)")
"""After a carriage return that no line feed follows: where a line of an old Mac file ends."""


def _any_line_ends(fh: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary file ending in a line feed, CR LF or a bare CR (as Python's text files and
    the csv module read them), each read at most MAX_LINE_BYTES + 1 bytes at a time: a line longer than
    that comes out longer than MAX_LINE_BYTES without its end, for the caller to refuse."""
    rest = b""
    while True:
        # readline(n) never holds more than n bytes, whatever the file: no line end, no growth.
        raw = fh.readline(MAX_LINE_BYTES + 1)
        data = rest + raw
        if not data:
            return
        *ended, rest = _BARE_CR.split(data)
        yield from ended
        if not raw or rest.endswith(b"\n") or len(rest) > MAX_LINE_BYTES:
            if rest:
                yield rest
            rest = b""
            if not raw:
                return


def text_lines(
    path: Path, what: str, *, hint: str = "save it as UTF-8", limit: int = MAX_TEXT_BYTES
) -> Iterator[str]:
    """`byte_lines` decoded as UTF-8 (line ends kept, as `csv.reader` wants them); a line that is not
    UTF-8 is an InputError naming the line and the byte."""
    offset = 0
    for number, raw in enumerate(byte_lines(path, what, limit), start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                path,
                f"{what} is not UTF-8 text (line {number:,}: byte {offset + exc.start:,} is "
                f"{raw[exc.start : exc.start + 1]!r})",
                hint=hint,
            ) from None
        offset += len(raw)


def read_document(path: Path, what: str, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """The whole of a file that is read at once (TOML, JSON), at most `limit` bytes: read in chunks, so a
    device or a growing file stops at the bound. OSError is the caller's to word."""
    chunks: list[bytes] = []
    total = 0
    with Path(path).open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            total += len(chunk)
            if total > limit:
                raise _too_big(path, what, limit)
            chunks.append(chunk)
    return b"".join(chunks)
