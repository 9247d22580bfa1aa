"""`taxonomy build-cub`: the S1 construction on a small checklist in the Clements CSV layout, covering
exact, fuzzy, alias and unmatched classes, the family-gloss merge, conflicts, and the import of the result."""

from __future__ import annotations

import csv
import difflib
import json
from pathlib import Path

import pytest

from hierconsole.cli import main
from hierconsole.datasets.checklist import canonical_family, common_name, normalised

HEADER = ["sort v2024", "species_code", "category", "English name", "scientific name", "order", "family"]
# (category, English name, scientific name, family) in the Clements CSV's layout.
CHECKLIST = [
    ("species", "Black-footed Albatross", "Phoebastria nigripes", "Diomedeidae (Albatrosses)"),
    ("species", "Laysan Albatross", "Phoebastria immutabilis", "Diomedeidae (Albatrosses)"),
    ("issf", "Laysan Albatross", "Phoebastria immutabilis [ssp]", "Diomedeidae (Albatrosses)"),
    ("species", "Brewer's Blackbird", "Euphagus cyanocephalus", "Icteridae (Troupials and Allies)"),
    ("species", "Greater Roadrunner", "Geococcyx californianus", "Cuculidae (Cuckoos)"),
    ("species", "American Yellow Warbler", "Setophaga aestiva", "Parulidae (New World Warblers)"),
    ("species", "Mangrove Warbler", "Setophaga petechia", "Parulidae (New World Warblers)"),
    ("species", "Cape May Warbler", "Setophaga tigrina", "Parulidae (New World Warblers)"),
    ("species", "Pine Warbler", "Setophaga pinus", "Parulidae"),
    ("species", "Groove-billed Ani", "Crotophaga sulcirostris", "Cuculidae (Cuckoos)"),
    (
        "group (polytypic)",
        "Groove-billed Ani (Pacific)",
        "Crotophaga sulcirostris [x]",
        "Cuculidae (Cuckoos)",
    ),
    ("species", "Sooty Albatross", "Phoebetria fusca", "Diomedeidae (Albatrosses)"),
    ("species", "Sooty Shearwater", "Ardenna grisea", "Procellariidae (Shearwaters and Petrels)"),
]
CLASSES = [
    "001.Black_footed_Albatross",  # exact
    "002.Laysan_Albatross",  # exact, and only the species row counts (the issf row is skipped)
    "003.Brewer_Blackbird",  # fuzzy: the possessive
    "004.Geococcyx",  # alias (CUB names the genus)
    "005.Yellow_Warbler",  # unmatched without an alias (the checklist split it)
    "006.Cape_May_Warbler",  # exact, family with the gloss
    "007.Pine_Warbler",  # exact, family without the gloss: merged with 006's
    "008.Groove_billed_Ani",  # exact
]
ALIASES = {"Geococcyx": "Greater Roadrunner", "005.Yellow_Warbler": "Setophaga aestiva"}


def write_checklist(path: Path, rows=CHECKLIST, header=HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for k, (category, english, scientific, family) in enumerate(rows, start=1):
            w.writerow([k, f"sp{k}", category, english, scientific, "Passeriformes", family])
    return path


@pytest.fixture
def inputs(tmp_path):
    classes = tmp_path / "classes.txt"
    classes.write_text("".join(f"{k} {name}\n" for k, name in enumerate(CLASSES, start=1)))
    aliases = tmp_path / "aliases.json"
    aliases.write_text(json.dumps(ALIASES))
    return classes, write_checklist(tmp_path / "clements.csv"), aliases


def build(capsys, *argv) -> tuple[int, str, str]:
    code = main(["taxonomy", "build-cub", *[str(a) for a in argv]])
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), " ".join(err.split())


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_names_are_normalised_and_families_lose_their_gloss():
    assert normalised("Chuck-will's-widow") == normalised("chuck_will_s widow") == "chuckwillswidow"
    assert common_name("001.Black_footed_Albatross") == "Black footed Albatross"
    assert canonical_family("Parulidae (New World Warblers)") == "Parulidae" == canonical_family("Parulidae")
    assert canonical_family("Foo (bar) (baz)") == "Foo (bar)"


def test_exact_fuzzy_alias_and_the_family_merge(capsys, inputs, tmp_path):
    classes, checklist, aliases = inputs
    out = tmp_path / "cub_taxonomy.csv"
    code, text, err = build(capsys, classes, checklist, "--aliases", aliases, "-o", out)
    assert code == 0, err
    assert "5 exact, 1 fuzzy, 2 alias, 0 unmatched" in text
    assert "merged family Parulidae: Parulidae + Parulidae (New World Warblers)" in text
    rows = read_csv(out)
    assert [r["class"] for r in rows] == CLASSES
    assert {r["class"]: (r["genus"], r["family"]) for r in rows} == {
        "001.Black_footed_Albatross": ("Phoebastria", "Diomedeidae"),
        "002.Laysan_Albatross": ("Phoebastria", "Diomedeidae"),
        "003.Brewer_Blackbird": ("Euphagus", "Icteridae"),
        "004.Geococcyx": ("Geococcyx", "Cuculidae"),
        "005.Yellow_Warbler": ("Setophaga", "Parulidae"),
        "006.Cape_May_Warbler": ("Setophaga", "Parulidae"),
        "007.Pine_Warbler": ("Setophaga", "Parulidae"),
        "008.Groove_billed_Ani": ("Crotophaga", "Cuculidae"),
    }
    report = {r["class"]: r for r in read_csv(tmp_path / "cub_taxonomy.report.csv")}
    assert [report[c]["method"] for c in CLASSES] == [
        "exact",
        "exact",
        "fuzzy",
        "alias",
        "alias",
        "exact",
        "exact",
        "exact",
    ]
    fuzzy = report["003.Brewer_Blackbird"]
    assert (
        fuzzy["common_name"] == "Brewer's Blackbird" and fuzzy["scientific_name"] == "Euphagus cyanocephalus"
    )
    # difflib's ratio is 2M/T: "brewerblackbird" (15) inside "brewersblackbird" (16) gives 2*15/31.
    assert float(fuzzy["score"]) == pytest.approx(30 / 31, abs=1e-4)
    assert float(fuzzy["score"]) == pytest.approx(
        difflib.SequenceMatcher(None, "brewerblackbird", "brewersblackbird").ratio(), abs=1e-4
    )
    assert report["007.Pine_Warbler"]["family_as_written"] == "Parulidae"
    assert report["006.Cape_May_Warbler"]["family_as_written"] == "Parulidae (New World Warblers)"


def test_the_result_imports_with_import_cub(capsys, tmp_path, cub):
    # The tiny CUB folder of tests/datasets/conftest.py: albatrosses and an ani.
    out = tmp_path / "built.csv"
    code, _, err = build(capsys, cub.root / "classes.txt", write_checklist(tmp_path / "c.csv"), "-o", out)
    assert code == 0, err
    code = main(
        ["--home", str(tmp_path / "home"), "import", "cub", str(cub.root), str(cub.features), str(out)]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "4/3/2 Class/Genus/Family" in " ".join(captured.out.split())


def test_unmatched_classes_are_refused_and_nothing_is_written(capsys, inputs, tmp_path):
    classes, checklist, _ = inputs
    out = tmp_path / "cub_taxonomy.csv"
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = build(capsys, classes, checklist, "-o", out)
    assert code == 2 and "Traceback" not in err
    assert "5 exact, 1 fuzzy, 0 alias, 2 unmatched; nothing written" in err
    assert "'004.Geococcyx' is unmatched" in err and "'005.Yellow_Warbler' is unmatched" in err
    assert "nearest: 'American Yellow Warbler'" in err and "--aliases" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_allow_unmatched_leaves_them_out_and_reports_them(capsys, inputs, tmp_path):
    classes, checklist, _ = inputs
    out = tmp_path / "partial.csv"
    code, text, err = build(capsys, classes, checklist, "-o", out, "--allow-unmatched")
    assert code == 0, err
    assert [r["class"] for r in read_csv(out)] == [
        c for c in CLASSES if c not in ("004.Geococcyx", "005.Yellow_Warbler")
    ]
    report = read_csv(tmp_path / "partial.report.csv")
    assert sum(r["method"] == "unmatched" for r in report) == 2 and len(report) == len(CLASSES)
    assert "left out 005.Yellow_Warbler" in text


def test_a_genus_under_two_families_is_refused_even_with_allow_unmatched(capsys, inputs, tmp_path):
    classes, _, aliases = inputs
    rows = [
        r
        if r[1] != "Pine Warbler"
        else ("species", "Pine Warbler", "Setophaga pinus", "Thraupidae (Tanagers)")
        for r in CHECKLIST
    ]
    checklist = write_checklist(tmp_path / "bad.csv", rows)
    out = tmp_path / "t.csv"
    code, _, err = build(capsys, classes, checklist, "--aliases", aliases, "-o", out, "--allow-unmatched")
    assert code == 2 and "genus 'Setophaga' falls under 2 families" in err
    assert not out.exists() and not (tmp_path / "t.report.csv").exists()


def test_two_classes_on_one_species_is_a_conflict(capsys, inputs, tmp_path):
    classes, checklist, _ = inputs
    aliases = tmp_path / "dup.json"
    aliases.write_text(json.dumps({**ALIASES, "Geococcyx": "Groove-billed Ani"}))
    code, _, err = build(capsys, classes, checklist, "--aliases", aliases, "-o", tmp_path / "t.csv")
    assert code == 2 and "both match 'Groove-billed Ani'" in err


def test_the_threshold_decides_what_fuzzy_may_match(capsys, inputs, tmp_path):
    classes, checklist, aliases = inputs
    code, _, err = build(
        capsys, classes, checklist, "--aliases", aliases, "-o", tmp_path / "t.csv", "--threshold", "0.99"
    )
    assert code == 2 and "'003.Brewer_Blackbird' is unmatched" in err and "0.968 < threshold 0.99" in err


def test_column_names_are_configurable(capsys, inputs, tmp_path):
    classes, _, aliases = inputs
    header = ["n", "code", "kind", "common", "latin", "order", "fam"]
    checklist = write_checklist(tmp_path / "own.csv", header=header)
    out = tmp_path / "t.csv"
    code, _, err = build(capsys, classes, checklist, "--aliases", aliases, "-o", out)
    assert code == 2 and "no common column" in err and "--common-column" in err and not out.exists()
    code, text, err = build(
        capsys, classes, checklist, "--aliases", aliases, "-o", out, "--common-column", "common",
        "--scientific-column", "latin", "--family-column", "fam", "--category-column", "kind",
    )  # fmt: skip
    assert code == 0, err
    assert "5 exact, 1 fuzzy, 2 alias, 0 unmatched" in text


@pytest.mark.parametrize(
    ("aliases", "needle"),
    [
        ({"Dodo": "Greater Roadrunner"}, "alias key 'Dodo' names no class"),
        ({"Geococcyx": "Lesser Roadrunner"}, "no checklist species has that common or scientific name"),
        (["not", "a", "mapping"], "expected a JSON object of strings"),
    ],
)
def test_bad_aliases_are_refused(capsys, inputs, tmp_path, aliases, needle):
    classes, checklist, _ = inputs
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(aliases))
    out = tmp_path / "t.csv"
    code, _, err = build(capsys, classes, checklist, "--aliases", path, "-o", out)
    assert code == 2 and needle in err and not out.exists()


def test_existing_outputs_are_kept(capsys, inputs, tmp_path):
    classes, checklist, aliases = inputs
    out = tmp_path / "t.csv"
    out.write_text("mine\n")
    code, _, err = build(capsys, classes, checklist, "--aliases", aliases, "-o", out)
    assert code == 2 and "--overwrite" in err and out.read_text() == "mine\n"
    assert build(capsys, classes, checklist, "--aliases", aliases, "-o", out, "--overwrite")[0] == 0


def test_taxonomy_keeps_its_dataset_form_beside_build_cub(capsys, tmp_path):
    home = ["--home", str(tmp_path / "home")]
    assert main([*home, "taxonomy", "cub", "--help"]) == 0
    assert "usage: hierconsole taxonomy" in capsys.readouterr().out
    assert main([*home, "taxonomy", "cub", "stray"]) == 2
    assert "unexpected arguments after the dataset: stray" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*home, "taxonomy", "build-cub", "--help"])
    assert exc.value.code == 0 and "usage: hierconsole taxonomy build-cub" in capsys.readouterr().out
