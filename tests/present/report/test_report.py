"""`hierconsole report`: the HTML report opened in a real headless Chromium (no request leaves the page,
every image decodes, every section is there, it prints), the Markdown report with its figures beside it,
the family report, and the refusals."""

from __future__ import annotations

import base64
import io
import re
import subprocess
import sys

import pytest
from PIL import Image

from hierconsole.cli import main
from hierconsole.present.report.document import Document, Section, Table, Text, render_html
from hierconsole.present.report.study_report import FAMILY_SECTION_IDS, SECTION_IDS, study_sections
from hierconsole.study.db.storage import Store
from hierconsole.study.read.report_inputs import study_inputs
from tests.present.report.chromium import Browser
from tests.present.report.conftest import FAMILY
from tests.stores.fixed import COMPLETE

PAGE_FACTS = """JSON.stringify({
  title: document.title,
  sections: [...document.querySelectorAll('section')].map(s => s.id),
  images: [...document.images].map(i => ({complete: i.complete, width: i.naturalWidth, height: i.naturalHeight})),
  posthoc: [...document.querySelectorAll('section.posthoc')].map(s => s.id),
  text: document.body.innerText,
})"""


def _open(path, tmp_path):
    import json

    browser = Browser(tmp_path / "profile")
    try:
        browser.open(path.as_uri())
        facts = json.loads(browser.evaluate(PAGE_FACTS))
        shot = browser.screenshot()
        pdf = browser.pdf()
        urls = browser.requested_urls()
    finally:
        browser.close()
    return facts, shot, pdf, urls


@pytest.mark.slow
def test_html_report_in_headless_chromium(report_home, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["--home", str(report_home), "report", COMPLETE, "-o", str(out)]) == 0
    assert f"wrote report to {out}" in capsys.readouterr().out
    facts, shot, pdf, urls = _open(out, tmp_path)
    # Nothing but the page itself and its inline images was requested: no font, script or style fetched.
    assert urls and all(u == out.as_uri() or u.startswith("data:") for u in urls), urls
    assert facts["sections"] == list(SECTION_IDS)
    assert facts["posthoc"] == ["posthoc"]
    # Every image decoded in the browser, and decodes here too.
    assert len(facts["images"]) >= 4 and all(i["complete"] and i["width"] > 100 and i["height"] > 100 for i in facts["images"])
    html = out.read_text(encoding="utf-8")
    for data in re.findall(r'src="data:image/png;base64,([^"]+)"', html):
        Image.open(io.BytesIO(base64.b64decode(data))).verify()
    # The screenshot is a real rendering of the whole page, not a blank one.
    image = Image.open(io.BytesIO(shot)).convert("L")
    assert image.size[1] > 2000 and sum(1 for count in image.histogram() if count) > 16
    assert pdf.startswith(b"%PDF")  # printable
    text = facts["text"]
    for heading in SECTION_IDS.values():
        assert heading in text
    with Store(report_home, read_only=True) as store:
        inputs = study_inputs(store, COMPLETE)
    geom = inputs.effects["hier_mAP"]["geom_R"]
    lo, hi = geom.evidence.ci95_t
    assert f"[{lo:.6f}, {hi:.6f}]" in text and f"{geom.mean:.6f} ± {geom.sd:.6f}" in text
    assert inputs.provenance["dataset"]["sha256"] in text and inputs.provenance["lock_sha256"] in text
    assert "update_budget" in text and "FAIL" in text  # the fixed study's failing audit, with its evidence
    assert f"hierconsole report {COMPLETE} -o report.html" in text
    assert "hierconsole run demo --dataset tiny --set" in text and "training.epochs=5" in text


@pytest.mark.slow
def test_family_report_in_headless_chromium(report_home, tmp_path):
    out = tmp_path / "family.html"
    assert main(["--home", str(report_home), "report", FAMILY, "-o", str(out)]) == 0
    facts, _, _, urls = _open(out, tmp_path)
    assert all(u == out.as_uri() or u.startswith("data:") for u in urls)
    assert facts["sections"] == list(FAMILY_SECTION_IDS)
    assert len(facts["images"]) == 3 and all(i["complete"] and i["width"] > 0 for i in facts["images"])
    assert "Base - Near-flat" in facts["text"] and "Strong - Base" in facts["text"]


def test_markdown_report_writes_its_figures_beside_it(report_home, tmp_path):
    out = tmp_path / "study.md"
    assert main(["--home", str(report_home), "report", COMPLETE, "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\((study_figures/[^)]+\.png)\)", text)
    assert links and sorted(links) == sorted(f"study_figures/{p.name}" for p in (tmp_path / "study_figures").iterdir())
    for link in links:
        Image.open(tmp_path / link).verify()
    for heading in SECTION_IDS.values():
        assert f"## {heading}" in text
    assert "**Post-hoc analysis: not the registered endpoint.**" in text
    assert "| ci95_t | ci95_boot | p_signflip | seeds_to_resolve |" in text


@pytest.mark.slow
def test_report_refusals_exit_2_and_write_nothing(report_home, tmp_path):
    def report(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "hierconsole", "--home", str(report_home), "report", *args],
            capture_output=True, text=True, timeout=120,
        )

    cases = {
        (COMPLETE, "-o", str(tmp_path / "r.pdf")): "end it with .html or .md",
        ("no-such", "-o", str(tmp_path / "r.html")): "no study 'no-such'",
        (COMPLETE, "-o", str(tmp_path / "missing" / "r.html")): "does not exist",
    }
    for args, message in cases.items():
        out = report(*args)
        assert out.returncode == 2 and message in " ".join(out.stderr.split()) and "Traceback" not in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "r_figures").mkdir()
    out = report(COMPLETE, "-o", str(tmp_path / "r.md"))
    assert out.returncode == 2 and "r_figures already exists" in " ".join(out.stderr.split())
    assert not (tmp_path / "r.md").exists()


def test_a_larger_report_reuses_the_study_sections(report_store):
    """The replication's whole-paper report is a Document of its own sections and the studies'."""
    import polars as pl

    inputs = study_inputs(report_store, COMPLETE)
    sections = [Section("paper", "The paper's tables", [Text("Beside the published values."), Table(pl.DataFrame({"x": [1]}))])]
    sections += [Section(f"cub-{s.id}", f"CUB: {s.title}", s.blocks, s.posthoc) for s in study_sections(inputs)]
    html = render_html(Document("Replication", "two datasets", sections))
    assert html.count("<section") == 1 + len(SECTION_IDS) and 'id="cub-effects"' in html
