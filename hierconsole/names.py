"""The names a user gives (studies, datasets, families, family members): one rule for all of them.

A name becomes an id and a folder name inside the home (`locations`), a part of a family member's study
name (`FAMILY.member`) and a `FAMILY:member` reference, so it must be one path component that cannot
climb out of the home (`..`, `/`), be hidden (a leading `.`) or outgrow a file name (a study id adds its
21-character time stamp to the name). The rule is checked where a name is read: a preset's `study.name`
(file, `--set` or `--name`), a family's names, and `--name` on import and sweep commands.
"""

from __future__ import annotations

import re
from typing import Final

from hierconsole.errors import REASON_CHARS, HierconsoleError, bounded

MAX_NAME_CHARS: Final = 100
"""The longest name: with a study id's time stamp and a job's folder, well inside a 255-byte file name."""
NAME_RULE: Final = f"letters, digits and . _ = + - only, starting with a letter or digit, at most {MAX_NAME_CHARS} characters"
_NAME: Final = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._=+-]{{0,{MAX_NAME_CHARS - 1}}}")


def name_problem(name: object) -> str | None:
    """What makes `name` no usable name (the rule included), or None when it is one."""
    if not isinstance(name, str):
        return f"expected a string: {NAME_RULE}"
    if len(name) > MAX_NAME_CHARS:
        return f"is {len(name):,} characters long: use {NAME_RULE}"
    if not _NAME.fullmatch(name):  # fullmatch: `$` would let a trailing newline through
        return f"is not a usable name (it names folders in the home): use {NAME_RULE}"
    return None


def check_name(name: str, where: str) -> str:
    """`name`, or a one-line error naming `where` it was given (`--name`) and the rule."""
    problem = name_problem(name)
    if problem is not None:
        raise HierconsoleError(f"{where} {bounded(repr(name), REASON_CHARS // 3)} {problem}")
    return name
