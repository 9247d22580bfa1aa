"""Writing a report: HTML as one file, Markdown with its figures in a folder beside it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hierconsole.errors import HierconsoleError
from hierconsole.present.export import check_output, write_output
from hierconsole.present.report.document import Document, render_html, render_markdown
from hierconsole.study.analysis.report_inputs import FamilyInputs, StudyInputs

REPORT_FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}
DEFAULT_REPORT = "report.html"


def report_format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in REPORT_FORMATS:
        raise HierconsoleError(
            f"cannot tell the report format of {str(path)!r} from its suffix\n  fix: end it with .html or .md"
        )
    return REPORT_FORMATS[suffix]


def figures_folder(path: str | Path) -> Path:
    """Where a Markdown report's figures go: `NAME_figures/` beside `NAME.md`."""
    path = Path(path).expanduser().absolute()
    return path.with_name(f"{path.stem}_figures")


def check_report_target(path: str | Path, force: bool) -> str:
    """Refuse, before anything is read or written, a report path that cannot be written; its format."""
    fmt = report_format(path)
    check_output(path, force)
    folder = figures_folder(path)
    if fmt == "md" and folder.exists() and not force:
        raise HierconsoleError(
            f"{folder} already exists; not overwriting its figures\n  fix: pass --force, or choose another path"
        )
    return fmt


def document_for(inputs: StudyInputs | FamilyInputs) -> Document:
    from hierconsole.present.report.study_report import family_document, study_document

    return family_document(inputs) if isinstance(inputs, FamilyInputs) else study_document(inputs)


def _write_bytes(data: bytes) -> Callable[[Path], object]:
    return lambda tmp: tmp.write_bytes(data)


def write_document(doc: Document, path: str | Path, *, force: bool = False) -> Path:
    """Write `doc` as the format of `path`'s suffix; returns the report's absolute path. A Markdown
    report's figures are written first, so the report never links a figure that is not there."""
    fmt = check_report_target(path, force)
    if fmt == "html":
        text = render_html(doc)
        return write_output(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), force=force)
    folder = figures_folder(path)
    text, figures = render_markdown(doc, folder.name)
    folder.mkdir(exist_ok=True)
    for name, data in figures.items():
        write_output(folder / name, _write_bytes(data), force=True)
    return write_output(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), force=force)


def write_report_of(inputs: StudyInputs | FamilyInputs, path: str | Path, *, force: bool = False) -> Path:
    """Write the report of `inputs` (`report REF -o PATH`, and replicate's reports); the target is checked by
    `write_document`, matplotlib before any figure is drawn."""
    from hierconsole.present.report.figures import require_matplotlib

    require_matplotlib()
    return write_document(document_for(inputs), path, force=force)
