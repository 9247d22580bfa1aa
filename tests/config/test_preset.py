"""Study presets: shipped files, validation messages, overrides and the configuration hash."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from hierconsole.config import Preset, list_presets, load_preset
from hierconsole.config.preset import OVERRIDES_SUFFIX
from hierconsole.errors import ConfigError, NotFoundError
from hierconsole.locations import resource_dir

REQUIRED_PRESETS = ("demo", "cub", "cub-tune", "nabirds-parent-disjoint")
SHIPPED = sorted(p.stem for p in resource_dir("presets").glob("*.toml"))

MINIMAL_TOML = """\
[study]
name = "t"

[data]
dataset = "synthetic:demo"

[evaluation]
aggregation = "micro"
n_query = 10

[geometry.poincare]
c = 1.0
r = 0.4

[temperature]
euclidean = 0.2
poincare = 0.2
"""


def write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> tuple[Path, str]:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_preset(path)
    return path, str(info.value)


def leaves(d: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for key, value in d.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            out.update(leaves(value, path))
        else:
            out[path] = value
    return out


def set_path(d: dict, path: str, value: object) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        d = d[part]
    d[leaf] = value


# --- shipped presets --------------------------------------------------------------------------------------


def test_required_presets_are_shipped() -> None:
    assert set(REQUIRED_PRESETS) <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_preset_loads_and_round_trips(name: str) -> None:
    preset = load_preset(name)
    d = preset.to_dict()
    # JSON-able and unchanged by a trip through JSON text.
    again = Preset.from_dict(json.loads(json.dumps(d)), source="json")
    assert again == preset
    assert again.to_dict() == d
    assert again.sha256() == preset.sha256()
    assert preset.study.name == name  # bare name and declared name agree, so listings are unambiguous


def _attribute_paths(obj: object, prefix: str = "") -> dict[str, object]:
    out = {}
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        if f.name == "source":
            continue
        value = getattr(obj, f.name)
        if value is None and f.metadata.get("omit_none"):
            continue  # an option newer than recorded studies: left out of the document while unset
        path = f"{prefix}.{f.name}" if prefix else f.name
        out.update(_attribute_paths(value, path) if dataclasses.is_dataclass(value) else {path: value})
    return out


@pytest.mark.parametrize("name", SHIPPED)
def test_to_dict_holds_every_attribute_and_every_written_value(name: str) -> None:
    preset = load_preset(name)
    d = leaves(preset.to_dict())
    attrs = _attribute_paths(preset)
    assert set(d) == set(attrs)
    for path, value in attrs.items():
        assert d[path] == (list(value) if isinstance(value, tuple) else value), path
    tomllib = pytest.importorskip("tomllib")  # the stdlib reader, independent of protocol's loader
    with open(resource_dir("presets") / f"{name}.toml", "rb") as fh:
        written = leaves(tomllib.load(fh))
    for path, value in written.items():
        assert d[path] == value, path


def test_cub_preset_matches_registered_protocol() -> None:
    p = load_preset("cub")
    assert p.data.dataset == "cub"
    assert p.split.protocol == "official"
    assert (p.geometry.poincare.c, p.geometry.poincare.r) == (2.0, 0.4)
    assert (p.temperature.euclidean, p.temperature.poincare) == (0.2, 0.2)
    assert (p.evaluation.aggregation, p.evaluation.n_query) == ("micro", 870)
    assert p.evaluation.qg_seeds == (42, 2024, 3407)
    t = p.training
    assert (t.epochs, t.lr, t.weight_decay, t.batch_size, t.drop_last) == (100, 5e-5, 1e-4, 128, True)
    assert (t.grad_clip, t.dropout, t.hidden, t.out_dim) == (1.0, 0.1, 256, 32)
    assert (t.optimizer, t.lr_schedule) == ("adamw", "constant")
    assert t.seeds == (42, 2024, 3407)
    assert t.regression_targets == (0.2, 0.5, 0.8, 1.0)
    assert t.level_weights == (1.0, 1.0, 1.0)
    assert p.tuned_geometries == ()


def test_nabirds_preset_matches_registered_protocol() -> None:
    p = load_preset("nabirds-parent-disjoint")
    assert (p.split.protocol, p.split.level, p.split.counts) == (
        "hierarchy_disjoint",
        "middle",
        (242, 81, 81),
    )
    assert p.split.fractions is None
    assert (p.geometry.poincare.c, p.geometry.poincare.r) == (0.1, 0.4)
    assert (p.temperature.euclidean, p.temperature.poincare) == (0.5, 0.5)
    assert (p.evaluation.aggregation, p.evaluation.n_query) == ("macro", 1003)
    assert p.training.epochs == 100


def test_demo_preset_is_small_and_never_tunes() -> None:
    p = load_preset("demo")
    assert p.data.dataset == "synthetic:demo"
    assert p.split.protocol == "official"
    assert p.tuned_geometries == ()
    assert p.training.epochs <= 30
    assert p.training.seeds == (42, 2024, 3407)
    assert 100 <= p.evaluation.n_query <= 300


def test_cub_tune_differs_from_cub_only_in_name_and_temperatures() -> None:
    tune, cub = load_preset("cub-tune"), load_preset("cub")
    assert tune.tuned_geometries == ("euclidean", "poincare")
    assert tune.temperature.for_geometry("poincare") == "tune"
    tuning = tune.temperature.tuning
    assert (tuning.candidates, tuning.seed, tuning.epochs) == ((0.07, 0.1, 0.2, 0.3, 0.5, 1.0), 42, 50)
    a, b = leaves(tune.to_dict()), leaves(cub.to_dict())
    assert {k for k in a if a[k] != b[k]} == {
        "study.name",
        "study.description",
        "temperature.euclidean",
        "temperature.poincare",
    }


def test_defaults_follow_the_paper_protocol(tmp_path: Path) -> None:
    p = load_preset(write(tmp_path, MINIMAL_TOML))
    t = p.training
    assert (t.lr, t.weight_decay, t.batch_size, t.drop_last, t.grad_clip, t.dropout) == (
        5e-5,
        1e-4,
        128,
        True,
        1.0,
        0.1,
    )
    assert (t.epochs, t.seeds, t.hidden, t.out_dim) == (100, (42, 2024, 3407), 256, 32)
    assert p.evaluation.qg_seeds == (42, 2024, 3407)
    assert p.temperature.tuning.candidates == (0.07, 0.10, 0.20, 0.30, 0.50, 1.00)
    assert (p.temperature.tuning.seed, p.temperature.tuning.epochs) == (42, 50)
    assert (p.compute.device, p.compute.threads_per_worker, p.compute.max_parallel_jobs) == ("auto", 1, 1)
    assert (p.controls.taxonomy_shuffle, p.controls.shuffle_seed) == (False, 20260818)
    assert p.split.protocol == "official"
    assert p.source == str(tmp_path / "p.toml")


def test_preset_is_immutable() -> None:
    p = load_preset("demo")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.training.epochs = 3  # type: ignore[misc]


# --- resolution and listing -------------------------------------------------------------------------------


def test_bare_name_resolves_to_shipped_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a bare name must not depend on the working directory
    by_name = load_preset("demo")
    assert Path(by_name.source) == resource_dir("presets") / "demo.toml"
    assert load_preset("demo.toml") == by_name
    assert load_preset(resource_dir("presets") / "demo.toml") == by_name


def test_existing_local_file_wins_over_shipped_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, MINIMAL_TOML, name="demo.toml")
    assert load_preset("demo.toml").study.name == "t"
    assert load_preset("demo").study.name == "demo"  # no suffix: always the shipped preset


def test_unknown_preset_lists_shipped_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotFoundError) as info:
        load_preset("dmeo")
    assert "'dmeo'" in str(info.value)
    for name in REQUIRED_PRESETS:
        assert name in str(info.value)
    with pytest.raises(NotFoundError):
        load_preset(tmp_path / "missing" / "x.toml")


def test_list_presets_names_paths_descriptions() -> None:
    listed = list_presets()
    assert [name for name, _, _ in listed] == SHIPPED
    for name, path, description in listed:
        assert path == resource_dir("presets") / f"{name}.toml"
        assert description == load_preset(name).study.description
        assert description.strip()


# --- validation errors ------------------------------------------------------------------------------------


def test_unknown_key_is_named_with_suggestion(tmp_path: Path) -> None:
    path, msg = load_error(tmp_path, MINIMAL_TOML + "\n[training]\nepoch = 5\n")
    assert str(path) in msg
    assert "training.epoch: unknown key" in msg
    assert "did you mean 'training.epochs'?" in msg


def test_key_in_wrong_table_points_to_its_home(tmp_path: Path) -> None:
    text = MINIMAL_TOML.replace('name = "t"', 'name = "t"\nepochs = 3')
    path, msg = load_error(tmp_path, text)
    assert str(path) in msg
    assert "study.epochs: unknown key" in msg
    assert "did you mean 'training.epochs'?" in msg


def test_unknown_table_is_an_error(tmp_path: Path) -> None:
    path, msg = load_error(tmp_path, MINIMAL_TOML + "\n[trainig]\nlr = 1e-4\n")
    assert str(path) in msg
    assert "trainig: unknown key" in msg
    assert "did you mean 'training'?" in msg


@pytest.mark.parametrize(
    ("table", "line", "key", "fragments"),
    [
        # wrong types
        ("training", 'epochs = "ten"', "training.epochs", ['"ten"', "a string", "an integer >= 1"]),
        ("training", "epochs = 10.0", "training.epochs", ["10.0", "an integer >= 1"]),
        ("training", "lr = true", "training.lr", ["true", "a boolean", "a number > 0"]),
        ("training", "drop_last = 1", "training.drop_last", ["1", "true or false"]),
        ("training", "seeds = 42", "training.seeds", ["42", "non-empty array"]),
        (
            "training",
            'seeds = [42, "x"]',
            "training.seeds",
            ['item 1 = "x"', "an integer in [0, 4294967295]"],
        ),
        # out of range
        ("training", "lr = -1", "training.lr", ["-1", "out of range", "a number > 0"]),
        ("training", "lr = nan", "training.lr", ["nan", "finite"]),
        ("training", "dropout = 1.0", "training.dropout", ["1.0", "a number in [0, 1)"]),
        ("training", "epochs = 0", "training.epochs", ["0", "an integer >= 1"]),
        ("training", "batch_size = 1", "training.batch_size", ["an integer >= 2"]),
        ("training", "seeds = [-1]", "training.seeds", ["item 0 = -1", "[0, 4294967295]"]),
        ("training", "seeds = []", "training.seeds", ["[]", "is empty"]),
        ("training", "seeds = [42, 42]", "training.seeds", ["repeats 42", "no repeats"]),
        ("training", "level_weights = [1.0]", "training.level_weights", ["has 1 items", "2 to 12 values"]),
        (
            "training",
            "regression_targets = [0.2, 0.8, 0.5, 1.0]",
            "training.regression_targets",
            ["not strictly increasing"],
        ),
        ("training", "level_weights = [0, 0, 0]", "training.level_weights", ["all zero", "at least one"]),
        ("compute", "threads_per_worker = 0", "compute.threads_per_worker", ["an integer >= 1"]),
        ("temperature.tuning", "query_fraction = 1.0", "temperature.tuning.query_fraction", ["(0, 1)"]),
        # enums and special strings
        ("compute", 'device = "tpu"', "compute.device", ['"tpu"', "'auto', 'cpu', 'cuda', 'mps'"]),
        ("training", 'optimizer = "sgd"', "training.optimizer", ['"sgd"', "one of 'adamw'"]),
        (
            "split",
            'protocol = "oficial"',
            "split.protocol",
            ["did you mean 'official'?", "'hierarchy_disjoint'"],
        ),
        ("split", "level = 13", "split.level", ["out of range", "a level: its code", "number from 1 (the leaf)"]),
        # the baselines
        ("baselines.hier", "proxies = 0", "baselines.hier.proxies", ["0", "an integer >= 1"]),
        ("baselines.hier", "c = -0.1", "baselines.hier.c", ["-0.1", "a number > 0"]),
        ("baselines.hier", "hier_weight = -1", "baselines.hier.hier_weight", ["-1", "a number >= 0"]),
        ("baselines.hier", 'tau = "x"', "baselines.hier.tau", ['"x"', "a number > 0"]),
        ("baselines.hier", 'recipe = "author"', "baselines.hier.recipe", ["'authors', 'matched'"]),
        ("baselines.hier", "batch_size = 181", "baselines.hier.batch_size", ["not a multiple", "per_class = 2"]),
    ],
)
def test_bad_value_names_file_key_value_and_allowed(
    tmp_path: Path, table: str, line: str, key: str, fragments: list[str]
) -> None:
    path, msg = load_error(tmp_path, MINIMAL_TOML + f"\n[{table}]\n{line}\n")
    assert str(path) in msg
    assert f"{key} = " in msg or f"{key}:" in msg
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)


@pytest.mark.parametrize(
    ("old", "new", "key", "fragments"),
    [
        ('aggregation = "micro"', 'aggregation = "mean"', "evaluation.aggregation", ["'micro', 'macro'"]),
        ("euclidean = 0.2", 'euclidean = "tun"', "temperature.euclidean", ["did you mean 'tune'?"]),
        ("euclidean = 0.2", "euclidean = 0", "temperature.euclidean", ["a number > 0, or 'tune'"]),
        ("c = 1.0", "c = 0.0", "geometry.poincare.c", ["0.0", "a number > 0"]),
        ("n_query = 10", "n_query = 10\npca_whiten = 1", "evaluation.pca_whiten", ["1", "true or false"]),
        ("n_query = 10", 'n_query = 10\nbaselines = ["hiers"]', "evaluation.baselines", ["'frozen', 'pca', 'hier'"]),
        ('name = "t"', "name = 3", "study.name", ["3", "expected a string: letters, digits and . _ = + - only"]),
        ('name = "t"', 'name = "  "', "study.name", ["not a usable name", "starting with a letter or digit"]),
        ('name = "t"', 'name = "../t"', "study.name", ["../t", "not a usable name (it names folders in the home)"]),
        ('name = "t"', f'name = "{"t" * 101}"', "study.name", ["is 101 characters long", "at most 100 characters"]),
        (
            'dataset = "synthetic:demo"',
            'dataset = "synthetic:huge"',
            "data.dataset",
            ["'synthetic:demo', 'synthetic:cub-sized'"],
        ),
    ],
)
def test_bad_value_in_required_key(
    tmp_path: Path, old: str, new: str, key: str, fragments: list[str]
) -> None:
    assert old in MINIMAL_TOML
    path, msg = load_error(tmp_path, MINIMAL_TOML.replace(old, new))
    assert str(path) in msg
    assert f"{key} = " in msg
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)


@pytest.mark.parametrize(
    ("line", "key", "expected"),
    [
        ('name = "t"', "study.name", "letters, digits and . _ = + - only"),
        ('dataset = "synthetic:demo"', "data.dataset", "'synthetic:demo'"),
        ("n_query = 10", "evaluation.n_query", "an integer >= 1"),
        ("r = 0.4", "geometry.poincare.r", "a number > 0"),
        ("poincare = 0.2", "temperature.poincare", "'tune'"),
    ],
)
def test_missing_required_key_is_named(tmp_path: Path, line: str, key: str, expected: str) -> None:
    assert line in MINIMAL_TOML
    path, msg = load_error(tmp_path, MINIMAL_TOML.replace(line + "\n", ""))
    assert str(path) in msg
    assert f"{key}: required key is missing" in msg
    assert expected in msg


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = MINIMAL_TOML.replace("n_query = 10", "n_query = -3") + "\n[training]\nlr = 0\nepoch = 2\n"
    _, msg = load_error(tmp_path, text)
    assert "(3 problems)" in msg
    for key in ("evaluation.n_query", "training.lr", "training.epoch"):
        assert key in msg


def test_table_given_as_value(tmp_path: Path) -> None:
    path, msg = load_error(tmp_path, "training = 5\n" + MINIMAL_TOML)
    assert str(path) in msg
    assert "training = 5 (an integer): expected a table [training]" in msg


def test_invalid_toml_names_file_and_line(tmp_path: Path) -> None:
    path, msg = load_error(tmp_path, MINIMAL_TOML + "\n[training]\nepochs = = 3\n")
    assert str(path) in msg
    assert "not valid TOML" in msg
    assert "line" in msg


def test_split_rules_across_keys(tmp_path: Path) -> None:
    _, msg = load_error(tmp_path, MINIMAL_TOML + '\n[split]\nprotocol = "hierarchy_disjoint"\n')
    assert "exactly one of split.counts or split.fractions" in msg
    _, msg = load_error(
        tmp_path,
        MINIMAL_TOML
        + '\n[split]\nprotocol = "hierarchy_disjoint"\ncounts = [1, 1, 1]\nfractions = [0.5, 0.25, 0.25]\n',
    )
    assert "(got both)" in msg
    _, msg = load_error(
        tmp_path, MINIMAL_TOML + '\n[split]\nprotocol = "hierarchy_disjoint"\nfractions = [0.5, 0.25, 0.3]\n'
    )
    assert "split.fractions = [0.5, 0.25, 0.3]: sums to 1.05" in msg
    _, msg = load_error(tmp_path, MINIMAL_TOML + "\n[split]\ncounts = [1, 1, 1]\n")
    assert "split.counts = [1, 1, 1]: only used with protocol = 'hierarchy_disjoint'" in msg
    _, msg = load_error(
        tmp_path,
        MINIMAL_TOML + '\n[split]\nprotocol = "hierarchy_disjoint"\nlevel = "leaf"\ncounts = [2, 1, 1]\n',
    )
    assert 'split.level = "leaf"' in msg
    ok = load_preset(
        write(
            tmp_path,
            MINIMAL_TOML + '\n[split]\nprotocol = "hierarchy_disjoint"\nfractions = [0.6, 0.2, 0.2]\n',
            name="ok.toml",
        )
    )
    assert ok.split.fractions == (0.6, 0.2, 0.2)


def test_tuning_needs_two_candidates(tmp_path: Path) -> None:
    text = MINIMAL_TOML.replace("euclidean = 0.2", 'euclidean = "tune"')
    _, msg = load_error(tmp_path, text + "\n[temperature.tuning]\ncandidates = [0.2]\n")
    assert "temperature.tuning.candidates = [0.2]: tuning needs at least two candidates" in msg
    fixed = load_preset(
        write(tmp_path, MINIMAL_TOML + "\n[temperature.tuning]\ncandidates = [0.2]\n", "f.toml")
    )
    assert fixed.temperature.tuning.candidates == (0.2,)


def test_from_dict_rejects_non_mapping() -> None:
    with pytest.raises(ConfigError, match="src: invalid preset"):
        Preset.from_dict([1, 2], source="src")  # type: ignore[arg-type]


# --- overrides ---------------------------------------------------------------------------------------------


def test_overrides_apply_and_leave_original_unchanged() -> None:
    base = load_preset("cub")
    before = base.to_dict()
    p = base.with_overrides(epochs=5, seeds=[42, 2024], device="cpu", dataset="cub-small")
    assert (p.training.epochs, p.training.seeds, p.compute.device, p.data.dataset) == (
        5,
        (42, 2024),
        "cpu",
        "cub-small",
    )
    assert base.to_dict() == before
    a, b = leaves(base.to_dict()), leaves(p.to_dict())
    assert {k for k in a if a[k] != b[k]} == {
        "training.epochs",
        "training.seeds",
        "compute.device",
        "data.dataset",
    }
    assert "overrides" in p.source
    assert base.with_overrides() == base


def test_overrides_applied_twice_say_so_once() -> None:
    # A family member's overrides, then the command line's --set: the source named "(with overrides)" twice.
    base = load_preset("demo")
    p = base.with_overrides(epochs=2).with_overrides(values={"training.epochs": 3})
    assert p.source == base.source + OVERRIDES_SUFFIX
    with pytest.raises(ConfigError) as info:
        p.with_overrides(epochs=0)
    assert str(info.value).count(OVERRIDES_SUFFIX.strip()) == 1, str(info.value)


def test_dotted_overrides() -> None:
    p = load_preset("demo").with_overrides(
        values={"geometry.poincare.c": 0.5, "temperature.euclidean": "tune"}
    )
    assert p.geometry.poincare.c == 0.5
    assert p.tuned_geometries == ("euclidean",)


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"epochs": 0}, ["training.epochs = 0", "an integer >= 1"]),
        ({"seeds": []}, ["training.seeds = []", "is empty"]),
        ({"seeds": [1, 1]}, ["training.seeds = [1, 1]", "repeats 1"]),
        ({"device": "tpu"}, ['compute.device = "tpu"', "'auto', 'cpu', 'cuda', 'mps'"]),
        (
            {"values": {"training.epoch": 3}},
            ["training.epoch: unknown key", "did you mean 'training.epochs'?"],
        ),
        ({"values": {"training.lr.x": 3}}, ["training.lr: is an option, not a table"]),
        ({"values": {"training": 3}}, ["training = 3 (an integer): expected a table"]),
    ],
)
def test_overrides_are_validated(kwargs: dict, fragments: list[str]) -> None:
    base = load_preset("demo")
    with pytest.raises(ConfigError) as info:
        base.with_overrides(**kwargs)
    msg = str(info.value)
    assert base.source in msg
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)


# --- configuration hash -----------------------------------------------------------------------------------


def test_sha256_is_sha_of_canonical_json() -> None:
    p = load_preset("nabirds-parent-disjoint")
    reference = hashlib.sha256(
        json.dumps(p.to_dict(), sort_keys=True, separators=(",", ":")).encode("utf-8")
    ).hexdigest()
    assert p.sha256() == reference
    assert load_preset("nabirds-parent-disjoint").sha256() == reference


def test_sha256_ignores_spelling_and_order(tmp_path: Path) -> None:
    a = load_preset(write(tmp_path, MINIMAL_TOML + "\n[training]\nlr = 1\nseeds = [1, 2]\n", "a.toml"))
    # Same values: int for a float option, sections and candidates reordered, comments added.
    text = (
        "# comment\n[training]\nseeds = [1, 2]\nlr = 1.0\n\n[temperature.tuning]\n"
        "candidates = [1.0, 0.5, 0.3, 0.2, 0.1, 0.07]\n\n" + MINIMAL_TOML
    )
    b = load_preset(write(tmp_path, text, "b.toml"))
    assert a == b
    assert a.sha256() == b.sha256()
    assert a.source != b.source  # where a preset came from is not part of it


# Options with a single allowed value cannot change; everything else must move the hash.
UNCHANGEABLE = {"training.optimizer", "training.lr_schedule"}


def _mutations(d: dict) -> dict[str, dict]:
    """For each option of `d`, a copy with only that option changed to another valid value."""
    out = {}
    for path, value in leaves(d).items():
        if path in UNCHANGEABLE:
            continue
        new = copy.deepcopy(d)
        if path == "split.protocol":
            if value != "official":
                continue
            new["split"].update(protocol="hierarchy_disjoint", counts=[3, 1, 1])
        elif path in ("split.counts", "split.fractions"):
            if d["split"]["protocol"] != "hierarchy_disjoint":
                continue
            if value is None:  # swap the other form in
                other = "fractions" if path == "split.counts" else "counts"
                new["split"][other] = None
                new["split"][path.split(".")[1]] = (
                    [0.6, 0.2, 0.2] if path.endswith("fractions") else [3, 1, 1]
                )
            else:
                set_path(new, path, [*value[:-1], value[-1] + (1 if isinstance(value[-1], int) else 0.0)])
        elif path in ("split.leaf_counts", "split.image_counts", "split.images"):
            # Options of the disjoint protocol only.
            if d["split"]["protocol"] != "hierarchy_disjoint":
                continue
            if path == "split.images":
                set_path(new, path, "all" if value == "official" else "official")
            else:
                set_path(new, path, [1, 1, 1] if value is None else [*value[:-1], value[-1] + 1])
        elif path.startswith("expected.") and value is None:
            set_path(new, path, [1, 1, 1] if path.split(".")[1].startswith("part_") else 5)
        elif path == "temperature.tuning.n_query":
            set_path(new, path, 5 if value is None else value + 1)
        elif path in ("training.selection_epochs", "training.selection_score"):
            # Only valid with selection on: switch it on alongside (select_epoch alone is mutated below).
            new["training"]["select_epoch"] = True
            set_path(new, path, [1] if path.endswith("epochs") else ("leaf_mAP" if value != "leaf_mAP" else "high_mAP"))
            if d["training"]["val_every"] == 0:
                new["training"]["val_every"] = 1
        elif path == "training.cells":
            set_path(new, path, value[:-1] if len(value) > 1 else ["E_R", "H_S"])
        elif path == "evaluation.baselines":
            set_path(new, path, value[:-1] if value else ["frozen"])
        elif path == "baselines.hier.batch_size":
            # A class-balanced batch stays a multiple of the images per class.
            set_path(new, path, value + d["baselines"]["hier"]["per_class"])
        elif isinstance(value, bool):
            set_path(new, path, not value)
        elif value == "tune":
            set_path(new, path, 0.3)
        elif isinstance(value, int):
            set_path(new, path, value + 1)
        elif isinstance(value, float):
            set_path(new, path, value * 0.5)
        elif isinstance(value, list):
            last = value[-1]
            set_path(new, path, [*value[:-1], last + 1 if isinstance(last, int) else last * 1.5])
        elif isinstance(value, str):
            swaps = {
                "micro": "macro",
                "macro": "micro",
                "auto": "cpu",
                "middle": "high",
                "official": "hierarchy_disjoint",
                "authors": "matched",
            }
            set_path(new, path, "some-dataset" if path == "data.dataset" else swaps.get(value, value + "x"))
        else:
            raise AssertionError(f"no mutation for {path} = {value!r}")
        out[path] = new
    return out


def test_sha256_changes_with_every_option() -> None:
    all_paths = set(leaves(load_preset("demo").to_dict())) - UNCHANGEABLE
    covered: set[str] = set()
    for name in SHIPPED:
        base = load_preset(name)
        hashes = {base.sha256()}
        for path, changed in _mutations(base.to_dict()).items():
            p = Preset.from_dict(changed, source=f"{name}+{path}")
            assert p != base, path
            assert p.sha256() not in hashes, path
            hashes.add(p.sha256())
            covered.add(path)
    # Fractions appear in no shipped preset; swapping them in for counts covers them.
    assert covered >= all_paths, all_paths - covered


def test_nabirds_preset_targets_the_papers_split() -> None:
    p = load_preset("nabirds-parent-disjoint")
    assert p.split.images == "official"
    assert p.split.counts == (242, 81, 81) and p.split.leaf_counts == (328, 114, 113)
    assert p.split.image_counts == (13_959, 5_062, 5_017)
    assert p.temperature.tuning.n_query == 1_013


def test_split_targets_need_the_disjoint_protocol(tmp_path: Path) -> None:
    text = MINIMAL_TOML + '\n[split]\nprotocol = "official"\nleaf_counts = [1, 2, 3]\nimages = "official"\n'
    with pytest.raises(ConfigError) as info:
        load_preset(write(tmp_path, text, "p.toml"))
    msg = str(info.value)
    assert "split.leaf_counts = [1, 2, 3]: only used with protocol = 'hierarchy_disjoint'" in msg
    assert "split.images = 'official': only used with protocol = 'hierarchy_disjoint'" in msg
