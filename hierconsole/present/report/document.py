"""A report as data: a title and sections of blocks (text, tables, figures, commands), rendered as one
self-contained HTML file or as Markdown with its figures beside it.

Any caller assembles its own sections (the study and family reports in `present.report.study_report`, the
replication's whole-paper report) and hands them to :func:`render_html` or :func:`render_markdown`.
The renderers compute nothing: tables arrive as frames (formatted by `present.export.display_rows`, the same
"mean ± SD" and "[lo, hi]" cells as the Markdown and LaTeX exports), figures as PNG bytes.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field

import polars as pl

from hierconsole import __version__
from hierconsole.present.export import display_rows
from hierconsole.present.export import render_markdown as markdown_table


@dataclass(frozen=True)
class Text:
    text: str
    note: bool = False
    """A note (a caveat, what is left out) rather than body text."""


@dataclass(frozen=True)
class Table:
    frame: pl.DataFrame
    caption: str = ""
    precision: int = 4


@dataclass(frozen=True)
class Figure:
    name: str
    """File stem of the figure in a Markdown report (`<name>.png`); unique within a document."""
    png: bytes
    caption: str = ""


@dataclass(frozen=True)
class Facts:
    """Label: value lines (provenance, protocol)."""

    items: list[tuple[str, str]]


@dataclass(frozen=True)
class Code:
    text: str
    caption: str = ""
    collapsed: bool = False
    """Shown folded in HTML (a full preset); Markdown shows it as is."""


Block = Text | Table | Figure | Facts | Code


@dataclass(frozen=True)
class Section:
    id: str
    """The HTML anchor (`<section id=...>`), also what the report tests look for."""
    title: str
    blocks: list[Block] = field(default_factory=list)
    posthoc: bool = False
    """Marks a post-hoc analysis: never the registered endpoint, and labelled so in every rendering."""


@dataclass(frozen=True)
class Document:
    title: str
    subtitle: str
    sections: list[Section]


POSTHOC_LABEL = "post-hoc analysis: not the registered endpoint"

CSS = """
:root { --ink: #1a1a1a; --muted: #666; --rule: #ccc; --note: #fff7e0; --posthoc: #b35900; }
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: var(--ink); margin: 2rem auto;
       max-width: 60rem; padding: 0 1rem; line-height: 1.4; font-size: 14px; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; } h2 { font-size: 1.2rem; border-bottom: 1px solid var(--rule);
     padding-bottom: 0.2rem; margin-top: 2rem; }
.subtitle { color: var(--muted); margin-top: 0; }
nav ol { columns: 2; } nav a { color: inherit; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 12px; }
th, td { padding: 0.15rem 0.5rem; border-bottom: 1px solid var(--rule); text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.caption { color: var(--muted); font-size: 12px; margin: 0.8rem 0 0.1rem; }
.scroll { overflow-x: auto; }
figure { margin: 0.8rem 0; } figure img { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 12px; }
pre { background: #f5f5f5; padding: 0.6rem; overflow-x: auto; font-size: 12px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.1rem 1rem; font-size: 12px; }
dt { color: var(--muted); } dd { margin: 0; word-break: break-all; font-family: monospace; }
.note { background: var(--note); padding: 0.3rem 0.6rem; font-size: 12px; }
.posthoc { border-left: 4px solid var(--posthoc); padding-left: 0.8rem; }
.posthoc-label { color: var(--posthoc); font-weight: bold; text-transform: uppercase; font-size: 11px; }
footer { margin-top: 3rem; color: var(--muted); font-size: 11px; }
@media print {
  body { margin: 0; max-width: none; font-size: 10pt; } nav { display: none; }
  section, figure, table, pre, dl { break-inside: avoid; } h2 { break-after: avoid; }
  details { display: block; } details > pre { display: block; }
  .scroll { overflow: visible; }
}
"""


def _html_table(table: Table) -> str:
    headers, numeric, rows = display_rows(table.frame, table.precision, " ± ")
    cls = ["num" if n else "" for n in numeric]
    head = "".join(f'<th class="{c}">{html.escape(h)}</th>' for h, c in zip(headers, cls, strict=True))
    body = "".join(
        "<tr>" + "".join(f'<td class="{c}">{html.escape(v)}</td>' for v, c in zip(row, cls, strict=True)) + "</tr>"
        for row in rows
    )
    # The caption sits above the table rather than in it: a <caption> is only as wide as its table.
    caption = f'<p class="caption">{html.escape(table.caption)}</p>' if table.caption else ""
    return f'{caption}<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _html_block(block: Block) -> str:
    if isinstance(block, Text):
        return f'<p class="note">{html.escape(block.text)}</p>' if block.note else f"<p>{html.escape(block.text)}</p>"
    if isinstance(block, Table):
        return _html_table(block)
    if isinstance(block, Figure):
        data = base64.b64encode(block.png).decode("ascii")
        caption = f"<figcaption>{html.escape(block.caption)}</figcaption>" if block.caption else ""
        alt = html.escape(block.caption or block.name)
        return f'<figure id="figure-{html.escape(block.name)}"><img alt="{alt}" src="data:image/png;base64,{data}">{caption}</figure>'
    if isinstance(block, Facts):
        items = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in block.items)
        return f"<dl>{items}</dl>"
    caption = f"<p>{html.escape(block.caption)}</p>" if block.caption else ""
    pre = f"<pre><code>{html.escape(block.text)}</code></pre>"
    if block.collapsed:
        return f"{caption}<details><summary>show</summary>{pre}</details>"
    return caption + pre


def render_html(doc: Document) -> str:
    """One self-contained HTML page: inline style, figures as data URIs, nothing fetched from anywhere."""
    toc = "".join(f'<li><a href="#{html.escape(s.id)}">{html.escape(s.title)}</a></li>' for s in doc.sections)
    parts = []
    for s in doc.sections:
        label = f'<p class="posthoc-label">{POSTHOC_LABEL}</p>' if s.posthoc else ""
        blocks = "\n".join(_html_block(b) for b in s.blocks)
        cls = ' class="posthoc"' if s.posthoc else ""
        parts.append(f'<section id="{html.escape(s.id)}"{cls}>\n<h2>{html.escape(s.title)}</h2>{label}\n{blocks}\n</section>')
    body = "\n".join(parts)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        # No request may leave the page: a policy that forbids every fetch but inline style and data images.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; style-src \'unsafe-inline\'">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(doc.title)}</title><style>{CSS}</style></head><body>\n"
        f"<header><h1>{html.escape(doc.title)}</h1><p class=\"subtitle\">{html.escape(doc.subtitle)}</p></header>\n"
        f"<nav><ol>{toc}</ol></nav>\n{body}\n"
        f"<footer>Written by hierconsole {html.escape(__version__)}.</footer>\n</body></html>\n"
    )


def _md_block(block: Block, figure_dir: str) -> str:
    if isinstance(block, Text):
        return f"> {block.text}" if block.note else block.text
    if isinstance(block, Table):
        caption = f"*{block.caption}*\n\n" if block.caption else ""
        return caption + markdown_table(block.frame, block.precision).rstrip("\n")
    if isinstance(block, Figure):
        return f"![{block.caption or block.name}]({figure_dir}/{block.name}.png)" + (f"\n\n*{block.caption}*" if block.caption else "")
    if isinstance(block, Facts):
        return "\n".join(f"- **{k}**: `{v}`" for k, v in block.items)
    caption = f"{block.caption}\n\n" if block.caption else ""
    return f"{caption}```\n{block.text}\n```"


def render_markdown(doc: Document, figure_dir: str) -> tuple[str, dict[str, bytes]]:
    """The Markdown text, with figures linked as `figure_dir/<name>.png`, and those files' bytes by name."""
    lines = [f"# {doc.title}", "", doc.subtitle, ""]
    lines += [f"{i}. [{s.title}](#{s.id})" for i, s in enumerate(doc.sections, 1)] + [""]
    figures: dict[str, bytes] = {}
    for s in doc.sections:
        lines += [f'<a id="{s.id}"></a>', "", f"## {s.title}", ""]
        if s.posthoc:
            lines += [f"**{POSTHOC_LABEL.capitalize()}.**", ""]
        for b in s.blocks:
            lines += [_md_block(b, figure_dir), ""]
            if isinstance(b, Figure):
                figures[f"{b.name}.png"] = b.png
    lines.append(f"*Written by hierconsole {__version__}.*")
    return "\n".join(lines) + "\n", figures
