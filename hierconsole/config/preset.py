"""Study presets: the protocol of one study as frozen dataclasses, loaded from TOML and validated.

A preset fixes everything a study's runs depend on besides the data and the training seed: split protocol,
query/gallery perturbations, aggregation, the Poincaré operating point, temperatures (or how to tune them),
the optimiser, the budget and the controls (paper Sec. 3.4, 4, S3-S6, S9). Its canonical JSON and that
JSON's SHA256 are the study's configuration record, so `to_dict` is complete and deterministic.

Validation collects every problem of a file before raising, and each message names the file, the dotted
key, the bad value and what is allowed, so a user fixes a preset in one pass.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final, Literal

from hierconsole.config.options import (
    Bool,
    Check,
    Choice,
    FreeText,
    Invalid,
    ListOf,
    Name,
    Number,
    Optional,
    option,
    section,
    show,
    toml_type,
)
from hierconsole.errors import ConfigError
from hierconsole.factorial import Factorial, arm_codes, arm_of
from hierconsole.levels import MAX_LEVELS, MIN_LEVELS
from hierconsole.metrics.names import MetricSet
from hierconsole.names import name_problem
from hierconsole.registry import (
    GEOMETRIES as GEOMETRY_COMPONENTS,
)
from hierconsole.registry import (
    MAX_FACTORS,
    OBJECTIVES,
    Component,
    ComponentError,
    component,
)
from hierconsole.vocabulary import (
    AGGREGATIONS,
    ARMS,
    BASELINES,
    DEVICES,
    EUCLIDEAN,
    GEOMETRIES,
    HIER_AUTHORS,
    HIER_METRIC,
    HIER_RECIPES,
    LOSSES,
    LR_SCHEDULES,
    MAP,
    OPTIMIZERS,
    POINCARE,
    SPLIT_IMAGES,
    SPLIT_PROTOCOLS,
    SUPCON,
    SYNTHETIC_DATASETS,
    SYNTHETIC_PREFIX,
    Aggregation,
)

SYNTHETIC_REFS: tuple[str, ...] = tuple(f"{SYNTHETIC_PREFIX}{name}" for name in SYNTHETIC_DATASETS)
TUNE: Final = "tune"
"""The temperature value that asks for validation-only tuning instead of a fixed number (paper S6)."""

DEFAULT_SEEDS: tuple[int, ...] = (42, 2024, 3407)
DEFAULT_TEMPERATURE_CANDIDATES: tuple[float, ...] = (0.07, 0.10, 0.20, 0.30, 0.50, 1.00)
DEFAULT_SHUFFLE_SEED = 20260818
DEFAULT_SPLIT_FRACTIONS: tuple[float, float, float] = (0.6, 0.2, 0.2)
"""Groups per part (train, val, test) of a hierarchy-disjoint split given neither counts nor fractions."""
MAX_SEED = 2**32 - 1
"""numpy's legacy seeding accepts at most 32 bits; torch accepts more, so the smaller bound is the rule."""
OVERRIDES_SUFFIX = " (with overrides)"
"""Appended once to a preset's source when it is changed by a family member or the command line."""

Temperature = float | Literal["tune"]
LevelRef = str
"""A level as a preset names it: its code (`middle`, `genus`), its display name (any case) or its 1-based
number (1 = leaf, kept as the digit string). Which level it is depends on the dataset: `config.level_plan`
resolves it at launch (`Levels.resolve`)."""


class _Dataset(Check):
    expected = "a dataset id from `hierconsole datasets`, or one of " + ", ".join(
        repr(s) for s in SYNTHETIC_REFS
    )

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip() or value != value.strip():
            raise Invalid(f"expected {self.expected}")
        if value.startswith(SYNTHETIC_PREFIX) and value not in SYNTHETIC_REFS:
            raise Invalid(
                "unknown synthetic dataset: expected one of " + ", ".join(repr(s) for s in SYNTHETIC_REFS)
            )
        return value


class _Temperature(Check):
    expected = f"a number > 0, or {TUNE!r}"

    def __call__(self, value: Any) -> Temperature:
        if value == TUNE:
            return TUNE
        if isinstance(value, str) and difflib.get_close_matches(value.strip().lower(), [TUNE], n=1):
            raise Invalid(f"expected {self.expected}; did you mean {TUNE!r}?")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(f"expected {self.expected}")
        if not math.isfinite(value) or value <= 0:
            raise Invalid(f"out of range: expected {self.expected}")
        return float(value)


class _ArmName(Check):
    expected = "an arm name: a geometry code, '_' and an objective code (e.g. E_R)"

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str) or arm_codes(value) is None:
            raise Invalid(f"expected {self.expected}")
        return value


class _Cells(Check):
    """A non-empty subset of the factorial's arms; which arms exist, and their order, the factorial says
    (`_cross_check`)."""

    def __init__(self) -> None:
        self.inner = ListOf(_ArmName(), unique=True, what="the cells a study trains")
        self.expected = self.inner.expected

    def __call__(self, value: Any) -> tuple[str, ...]:
        return tuple(self.inner(value))


class _Factor(Check):
    """One factor of the factorial: 1 to MAX_FACTORS components by name, built-in or `module:Name`. The
    paper's pair comes back as None, so a preset that writes it out hashes as one that leaves it out."""

    def __init__(self, kind: Literal["geometry", "objective"], paper: tuple[str, ...]) -> None:
        self.kind, self.paper = kind, paper
        builtins = GEOMETRY_COMPONENTS if kind == "geometry" else OBJECTIVES
        self.expected = (
            f"1 to {MAX_FACTORS} distinct {kind} names ({', '.join(builtins)}, module:ClassName of your own, or "
            "an installed entry point's name)"
        )

    def __call__(self, value: Any) -> tuple[str, ...] | None:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not 1 <= len(value) <= MAX_FACTORS:
            raise Invalid(f"expected {self.expected}")
        names = []
        for item in value:
            if not isinstance(item, str):
                raise Invalid(f"expected {self.expected}")
            try:
                # An entry point's name is kept as the module:ClassName it resolves to here, so the study
                # (and whoever reads it, with the package installed or not) holds what was launched.
                c = component(self.kind, item)
                names.append(c.name if c.builtin else c.target)
            except ComponentError as exc:
                raise Invalid(str(exc)) from None
        if len(set(names)) != len(names):
            raise Invalid(f"names repeat: expected {self.expected}")
        codes = [component(self.kind, n).code for n in names]
        if len(set(codes)) != len(codes):
            raise Invalid(f"arm codes repeat ({', '.join(codes)}): give your own components distinct class names")
        return None if tuple(names) == self.paper else tuple(names)


class _Baselines(Check):
    """Baseline arms to score beside the cells: none (an empty list) or a subset of BASELINES, kept in
    vocabulary order."""

    def __init__(self) -> None:
        self.inner = ListOf(Choice(*BASELINES), unique=True, what="the baseline arms scored beside the cells")
        self.expected = f"an empty array or {self.inner.expected}"

    def __call__(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and not value:
            return ()
        chosen = set(self.inner(value))
        return tuple(b for b in BASELINES if b in chosen)


class _WholeTreeMetrics(Check):
    """`hierconsole.metrics` names scored over the whole tree beside the strict per-level metrics."""

    expected = "an array of metric names: H-AP, ASI, NDCG@K, mistake_severity@K, CPCC (K a positive integer)"

    def __call__(self, value: Any) -> tuple[str, ...]:
        if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
            raise Invalid(f"expected {self.expected}")
        if not all(isinstance(v, str) for v in value):
            raise Invalid(f"expected {self.expected}; every name is a string")
        names = tuple(value)
        try:
            parsed = MetricSet.parse(names) if names else None
        except ValueError as exc:
            raise Invalid(str(exc)) from None
        strict = [n for n in names if MetricSet.per_level(n)]
        if strict:
            raise Invalid(
                f"{', '.join(strict)}: mAP and R@K are scored at every level always; name only the whole "
                f"tree's metrics ({self.expected})"
            )
        return names if parsed is not None else ()


NONE: Final = "none"
"""The value that clears an optional target or expected count: TOML has no null, and a family whose
members draw other splits than its base (CUB's Genus-disjoint outer splits), or a shipped preset run on
a user's own data (`--set split.leaf_counts=none`), must drop what the base declares."""


class Clearable(Check):
    """An optional option that `"none"` also clears."""

    def __init__(self, inner: Check) -> None:
        self.inner = inner
        self.expected = f"{inner.expected}, or {NONE!r}"

    def __call__(self, value: Any) -> Any:
        return None if value is None or value == NONE else self.inner(value)


_SEED = Number(integer=True, ge=0, le=MAX_SEED)
_POSITIVE = Number(gt=0)
CURVATURE = Number(gt=0)
"""The check of a Poincaré absolute curvature c, wherever one is given (presets, `score --curvature`)."""
TANGENT_SCALE = Number(gt=0)
"""The check of the tangent radius r of the r*tanh squashing."""
_COUNT = Number(integer=True, ge=1)
_FRACTION = Number(gt=0, lt=1)


class _LevelRef(Check):
    """One level reference (`LevelRef`), kept as a string: a number as its digits (so `2` and `"2"` are one
    value and hash alike), a name or code as written, stripped."""

    expected = f"a level: its code (e.g. 'middle'), display name, or number from 1 (the leaf) to {MAX_LEVELS}"

    def __call__(self, value: Any) -> LevelRef:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, int) and not isinstance(value, bool):
            if not 1 <= value <= MAX_LEVELS:
                raise Invalid(f"out of range: expected {self.expected}")
            return str(value)
        if not isinstance(value, str) or not value.strip():
            raise Invalid(f"expected {self.expected}")
        return value.strip()


class _LevelRefs(Check):
    """A list of distinct level references. `--set KEY=[high]` reaches the check as the bare string
    "[high]" (not a TOML literal), so a string is read as such a list: brackets optional, items separated
    by commas."""

    def __init__(self, what: str) -> None:
        self.inner = ListOf(_LevelRef(), unique=True, max_length=MAX_LEVELS, what=what)
        self.expected = self.inner.expected

    def __call__(self, value: Any) -> tuple[LevelRef, ...]:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("[") and text.endswith("]"):
                text = text[1:-1]
            value = [item.strip().strip("\"'") for item in text.split(",")] if text.strip() else []
        refs: tuple[LevelRef, ...] = self.inner(value)
        # A reference may repeat in another form (2 and "middle"); resolution against the dataset says so.
        return refs


_SELECTION_SCORE = re.compile(rf"[a-z][a-z0-9]*_{MAP}")


class _SelectionScore(Check):
    """The hier score or one level's mAP, `{code}_mAP`: the form is checked here, the level code against
    the dataset at launch (`config.level_plan.selection_score`)."""

    expected = f"{HIER_METRIC!r} or a level's mAP as '{{code}}_{MAP}' (e.g. 'leaf_{MAP}', 'middle_{MAP}')"

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str) or not _SELECTION_SCORE.fullmatch(value):
            raise Invalid(f"expected {self.expected}")
        return value


# --- the preset -----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StudyConfig:
    name: str = option(Name(), doc="short study name shown in tables; it names the study's folder")
    description: str = option(FreeText(), "", doc="one line on what the study is for")


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    dataset: str = option(_Dataset(), doc="dataset id in the store, or built-in synthetic data")


@dataclass(frozen=True, kw_only=True)
class SplitConfig:
    protocol: str = option(Choice(*SPLIT_PROTOCOLS), "official", doc="which samples train, validate and test")
    level: LevelRef = option(
        _LevelRef(),
        "middle",
        doc="hierarchy_disjoint: level whose groups are disjoint (code, name or number; above the leaf); the "
        "default 'middle' is level 2 on data that has no level of that name",
    )
    counts: tuple[int, int, int] | None = option(
        Clearable(ListOf(_COUNT, length=3, what="train, val, test group counts")),
        None,
        doc="hierarchy_disjoint: groups per part, adding up to the dataset's groups (setting it clears fractions)",
    )
    fractions: tuple[float, float, float] | None = option(
        Clearable(ListOf(_FRACTION, length=3, what="train, val, test group fractions summing to 1")),
        None,
        doc="hierarchy_disjoint: share of the groups per part, rounded by largest remainder; fits any dataset "
        "(setting it clears counts)",
    )
    seed: int = option(_SEED, 42, doc="hierarchy_disjoint: seed of the group assignment")
    images: str = option(
        Choice(*SPLIT_IMAGES),
        "all",
        doc="hierarchy_disjoint: 'all' pools every image of a part's groups; 'official' gives train and val "
        "their groups' official-train images and test its groups' official-test images (NABirds, paper S1)",
    )
    leaf_counts: tuple[int, int, int] | None = option(
        Clearable(ListOf(_COUNT, length=3, what="train, val, test leaf counts")),
        None,
        doc="hierarchy_disjoint: leaves each part must hold; groups are swapped between parts until it does",
    )
    image_counts: tuple[int, int, int] | None = option(
        Clearable(ListOf(_COUNT, length=3, what="train, val, test image counts")),
        None,
        doc="hierarchy_disjoint: images each part must hold (after split.images); met like leaf_counts",
    )


@dataclass(frozen=True, kw_only=True)
class EvaluationConfig:
    aggregation: Aggregation = option(Choice(*AGGREGATIONS), doc="query-micro or group-macro (paper S2)")
    n_query: int = option(_COUNT, doc="queries per query/gallery perturbation of the test set")
    qg_seeds: tuple[int, ...] = option(
        ListOf(_SEED, unique=True), DEFAULT_SEEDS, doc="Q/G perturbation seeds"
    )
    baselines: tuple[str, ...] = option(
        _Baselines(),
        (),
        doc="reference arms scored on the same Q/G perturbations after the lock: frozen (input features, "
        "cosine), pca (to training.out_dim, fitted on the training samples only) and hier (a HIER-style "
        "projector trained in each seed's job beside the cells; options in [baselines.hier])",
    )
    pca_whiten: bool = option(
        Bool(), False, doc="pca baseline: scale each principal axis to unit variance (off: the axes keep theirs)"
    )
    metrics: tuple[str, ...] | None = option(
        Optional(_WholeTreeMetrics()),
        None,
        doc="metrics of the whole tree scored beside the strict per-level ones, on the same Q/G "
        "perturbations after the lock, with their effects: H-AP and ASI (HAPPIER's), NDCG@K, "
        "mistake_severity@K, CPCC (hierconsole.metrics; e.g. [\"H-AP\", \"NDCG@10\"]); default none",
        omit_none=True,
    )

    @property
    def whole_tree(self) -> tuple[str, ...]:
        """The whole tree's metrics this study scores (none unless `metrics` names them)."""
        return self.metrics or ()
    hier_levels: tuple[LevelRef, ...] | None = option(
        Optional(_LevelRefs("the levels the hier score averages")),
        None,
        doc="the levels the hier score averages (codes, names or numbers; never the leaf); default: every "
        "level above the leaf",
        omit_none=True,
    )


@dataclass(frozen=True, kw_only=True)
class HierConfig:
    """The HIER-style baseline (Kim, Jeong, Kwak, CVPR 2023): Proxy-Anchor on leaf labels plus HIER's
    hierarchical regularisation with learnable hyperbolic proxies. Defaults are those of the authors'
    public code and DINO/CUB script (hier/train.py, hier/losses.py, hier/sampler.py, hier/utils.py,
    scripts/DINO/hier_CUB.sh).

    ``recipe = "authors"`` trains it as that script does on the frozen features: class-balanced batches of
    ``batch_size`` images, ``per_class`` of each class (their UniqueClassSampler, 2 GPUs x 90), their head
    (LayerNorm without affine, Linear to ``embedding``, orthogonal init) and AdamW at ``lr`` with weight
    decay ``weight_decay`` and eps ``adam_eps`` on every group, every gradient clamped element-wise at
    ``grad_value_clip``, a constant learning rate. Their one-epoch warm-up holds only the backbone's
    learning rate at 0, and the backbone is frozen here, so it has no option. ``recipe = "matched"`` is the
    protocol-matched variant: the cells' MLP, learning rate, batch size, clip and batch order."""

    recipe: str = option(
        Choice(*HIER_RECIPES),
        HIER_AUTHORS,
        doc="authors (their sampler, head and optimiser; its own batches and parameter count) or matched "
        "(the cells' MLP, learning rate, batches and clip, so the cells' audits hold for it)",
    )
    batch_size: int = option(
        _COUNT, 180, doc="recipe = authors: images per batch (their 90 per GPU on 2 GPUs); drop_last"
    )
    per_class: int = option(_COUNT, 2, doc="recipe = authors: images of each sampled class per batch (IPC)")
    embedding: int = option(_COUNT, 128, doc="recipe = authors: width of their linear head (emb)")
    lr: float = option(_POSITIVE, 5e-6, doc="recipe = authors: learning rate of the head (lr x batch / 180)")
    weight_decay: float = option(Number(ge=0), 1e-2, doc="recipe = authors: AdamW weight decay of every group")
    adam_eps: float = option(_POSITIVE, 1e-4, doc="recipe = authors: AdamW eps (theirs under use_fp16)")
    proxies: int = option(_COUNT, 512, doc="learnable hyperbolic proxies of the HIER term (num_hproxies)")
    c: float = option(CURVATURE, 0.1, doc="curvature of HIER's Poincaré ball (hyp_c); also its ranking geometry")
    clip_r: float = option(_POSITIVE, 2.3, doc="feature clipping radius before expmap0 (clip_r)")
    margin: float = option(Number(ge=0), 0.1, doc="margin of the HIER triplet term (mrg)")
    tau: float = option(_POSITIVE, 0.1, doc="temperature of the Gumbel-softmax choice of a common ancestor")
    topk: int = option(_COUNT, 20, doc="neighbours of the reciprocal-kNN positives (topk)")
    triplets_per_anchor: int = option(_COUNT, 50, doc="triplets sampled per anchor (t_per_anchor)")
    hier_weight: float = option(Number(ge=0), 0.5, doc="weight of the HIER term (lambda2)")
    anchor_weight: float = option(_POSITIVE, 1.0, doc="weight of the Proxy-Anchor term (lambda1)")
    anchor_alpha: float = option(_POSITIVE, 32.0, doc="Proxy-Anchor scale alpha")
    anchor_margin: float = option(Number(ge=0), 0.1, doc="Proxy-Anchor margin delta")
    proxy_lr: float = option(
        _POSITIVE, 5e-2, doc="learning rate of the Proxy-Anchor class proxies (HIER: 1e4 x its 5e-6)"
    )
    hproxy_lr: float = option(_POSITIVE, 2.5e-4, doc="learning rate of the hyperbolic proxies (HIER: 50 x 5e-6)")
    grad_value_clip: float = option(
        _POSITIVE,
        10.0,
        doc="element-wise gradient clamp of the proxies, and under recipe = authors of the head too "
        "(HIER's clip_gradients_value)",
    )


@dataclass(frozen=True, kw_only=True)
class BaselinesConfig:
    hier: HierConfig = section(HierConfig)


@dataclass(frozen=True, kw_only=True)
class PoincareConfig:
    c: float = option(CURVATURE, doc="absolute curvature (sectional curvature -c)")
    r: float = option(TANGENT_SCALE, doc="tangent radius of the r*tanh squashing before expmap0")


PAPER_GEOMETRIES: tuple[str, ...] = GEOMETRIES
PAPER_OBJECTIVES: tuple[str, ...] = LOSSES


@dataclass(frozen=True, kw_only=True)
class FactorialConfig:
    """What the study crosses: G geometries × L objectives (default: the paper's 2 × 2)."""

    geometries: tuple[str, ...] | None = option(
        Optional(_Factor("geometry", PAPER_GEOMETRIES)),
        None,
        doc="the geometries crossed (default: euclidean, poincare)",
        omit_none=True,
    )
    losses: tuple[str, ...] | None = option(
        Optional(_Factor("objective", PAPER_OBJECTIVES)),
        None,
        doc="the objectives crossed (default: regression, supcon)",
        omit_none=True,
    )

    @property
    def geometry_components(self) -> tuple[Component, ...]:
        return tuple(component("geometry", n) for n in self.geometries or PAPER_GEOMETRIES)

    @property
    def objective_components(self) -> tuple[Component, ...]:
        return tuple(component("objective", n) for n in self.losses or PAPER_OBJECTIVES)

    @property
    def design(self) -> Factorial:
        return Factorial(
            tuple(c.code for c in self.geometry_components), tuple(c.code for c in self.objective_components)
        )

    def tau_cells(self, geometry: Component, cells: Sequence[str]) -> tuple[str, ...]:
        """The geometry's arms among `cells` whose built-in objective takes a temperature, its
        Taxonomy-SupCon cell first (the one that tunes it), then in the objectives' order."""
        objectives = sorted(self.objective_components, key=lambda o: o.name != SUPCON)
        arms = (arm_of(geometry.code, o.code) for o in objectives if o.takes_tau)
        return tuple(arm for arm in arms if arm in cells)

    def cell(self, arm: str) -> tuple[Component, Component]:
        """The (geometry, objective) components of one of the factorial's arms."""
        codes = arm_codes(arm)
        for g in self.geometry_components:
            for o in self.objective_components:
                if codes == (g.code, o.code):
                    return g, o
        raise ValueError(f"{arm!r} is not an arm of this factorial ({', '.join(self.design.arms)})")


@dataclass(frozen=True, kw_only=True)
class GeometryConfig:
    poincare: PoincareConfig = section(PoincareConfig)


@dataclass(frozen=True, kw_only=True)
class TuningConfig:
    candidates: tuple[float, ...] = option(
        ListOf(_POSITIVE, unique=True, sort=True), DEFAULT_TEMPERATURE_CANDIDATES, doc="temperatures tried"
    )
    seed: int = option(_SEED, 42, doc="training seed of every tuning run")
    epochs: int = option(_COUNT, 50, doc="fixed budget; candidates are scored at this epoch only")
    query_fraction: float = option(_FRACTION, 0.2, doc="share of the validation samples used as queries")
    n_query: int | None = option(
        Clearable(_COUNT), None, doc="exact number of validation queries instead of query_fraction (NABirds: 1,013)"
    )


@dataclass(frozen=True, kw_only=True)
class TemperatureConfig:
    euclidean: Temperature = option(_Temperature(), doc="Taxonomy-SupCon tau of the Euclidean cells")
    poincare: Temperature = option(_Temperature(), doc="Taxonomy-SupCon tau of the Poincaré cells")
    others: Temperature | None = option(
        Optional(_Temperature()),
        None,
        doc="tau of the temperature-taking cells of every other geometry (lorentz, product, your own)",
        omit_none=True,
    )
    tuning: TuningConfig = section(TuningConfig)

    def for_geometry(self, geometry: str) -> Temperature | None:
        """The temperature of a geometry's cells: a number, `tune`, or None (another geometry's, unset)."""
        if geometry == EUCLIDEAN:
            return self.euclidean
        return self.poincare if geometry == POINCARE else self.others


@dataclass(frozen=True, kw_only=True)
class TrainingConfig:
    seeds: tuple[int, ...] = option(
        ListOf(_SEED, unique=True), DEFAULT_SEEDS, doc="one job per training seed"
    )
    cells: tuple[str, ...] = option(
        _Cells(), ARMS, doc="the arms trained in lockstep within each seed (default: every arm of the factorial)"
    )
    epochs: int = option(_COUNT, 100, doc="fixed endpoint of every final cell")
    optimizer: str = option(Choice(*OPTIMIZERS), OPTIMIZERS[0], doc="the optimiser every cell uses")
    lr: float = option(_POSITIVE, 5e-5)
    weight_decay: float = option(Number(ge=0), 1e-4)
    lr_schedule: str = option(Choice(*LR_SCHEDULES), LR_SCHEDULES[0], doc="learning rate over the epochs")
    batch_size: int = option(Number(integer=True, ge=2), 128, doc="a contrastive batch needs two samples")
    drop_last: bool = option(Bool(), True)
    grad_clip: float = option(_POSITIVE, 1.0, doc="max gradient L2 norm")
    dropout: float = option(Number(ge=0, lt=1), 0.1)
    hidden: int = option(_COUNT, 256)
    out_dim: int = option(Number(integer=True, ge=2), 32)
    levels: tuple[LevelRef, ...] | None = option(
        Optional(_LevelRefs("the levels training labels use, the leaf among them")),
        None,
        doc="the levels the losses train on (codes, names or numbers; the leaf included); default: every level",
        omit_none=True,
    )
    regression_targets: tuple[float, ...] = option(
        ListOf(
            Number(ge=0),
            min_length=MIN_LEVELS + 1,
            max_length=MAX_LEVELS + 1,
            increasing=True,
            what="target distances of the pair relations, same leaf first, then same group at each trained "
            "level, then unrelated",
        ),
        (0.2, 0.5, 0.8, 1.0),
        doc="one per trained level and one for unrelated pairs; the default means the evenly spaced targets "
        "of any depth (for three levels exactly these)",
    )
    level_weights: tuple[float, ...] = option(
        ListOf(
            Number(ge=0),
            min_length=MIN_LEVELS,
            max_length=MAX_LEVELS,
            what="Taxonomy-SupCon weights of the trained levels, leaf first",
        ),
        (1.0, 1.0, 1.0),
        doc="one per trained level, leaf first; equal weights of any count mean equal at every trained level",
    )
    val_every: int = option(Number(integer=True, ge=0), 10, doc="validation period in epochs; 0 = never")
    select_epoch: bool = option(
        Bool(),
        False,
        doc="each arm freezes one duration on the development validation split (paper S9) instead of the fixed "
        "endpoint: the candidate epoch with the best mean over seeds (ties: the earliest); runs fit the train "
        "part only, keep each candidate epoch's state, and test scores every seed of the arm at that epoch",
    )
    selection_epochs: tuple[int, ...] | None = option(
        Optional(ListOf(_COUNT, unique=True, sort=True, what="candidate epochs")),
        None,
        doc="select_epoch: the candidate epochs (default: every val_every epoch and the last); "
        "each keeps a model checkpoint per cell",
    )
    selection_score: str = option(
        _SelectionScore(),
        HIER_METRIC,
        doc="select_epoch: the validation score that picks the epoch (hier_mAP, or {level code}_mAP)",
    )

    def validates_at(self, epoch: int) -> bool:
        """Whether a final run validates after `epoch`: at the candidate epochs when they are listed,
        else every val_every epochs and at the end."""
        if self.select_epoch and self.selection_epochs is not None:
            return epoch in self.selection_epochs
        return self.val_every > 0 and (epoch % self.val_every == 0 or epoch == self.epochs)


@dataclass(frozen=True, kw_only=True)
class ComputeConfig:
    device: str = option(Choice(*DEVICES), "auto", doc="auto = cuda, then mps, then cpu")
    threads_per_worker: int = option(_COUNT, 1, doc="torch intra-op threads in each worker")
    max_parallel_jobs: int = option(_COUNT, 1, doc="concurrent seed jobs on CPU (one per GPU otherwise)")


@dataclass(frozen=True, kw_only=True)
class ControlsConfig:
    taxonomy_shuffle: bool = option(
        Bool(),
        False,
        doc="train on a structure-preserving shuffle of the development taxonomy (paper S9); validation and "
        "test read the true taxonomy",
    )
    shuffle_seed: int = option(_SEED, DEFAULT_SHUFFLE_SEED, doc="seed of the taxonomy shuffle")


_EXPECTED = Clearable(_COUNT)
_PER_PART = Clearable(ListOf(_COUNT, length=3, what="train, val, test counts of the protocol split"))


@dataclass(frozen=True, kw_only=True)
class ExpectedConfig:
    """Counts the realised study must show, each optional; the `expected_counts` audit fails on any that
    differs (e.g. the paper's S1/S12 numbers in the shipped presets, or a user's own protocol).

    The group counts name three-level data's levels (`middle_groups`, `high_groups`, `part_middle_groups`):
    the audit and the launch's fit check read them by these names, so a count per level of deeper data
    waits for them to read levels (a declared count nothing checks would be a silent pass)."""

    development_images: int | None = option(_EXPECTED, None, doc="images final runs train on (NABirds 19,021)")
    test_images: int | None = option(_EXPECTED, None, doc="images of the test part before Q/G draws")
    query_images: int | None = option(_EXPECTED, None, doc="queries of every Q/G perturbation")
    gallery_images: int | None = option(_EXPECTED, None, doc="gallery of every Q/G perturbation")
    tuning_fit_images: int | None = option(_EXPECTED, None, doc="images temperature-tuning runs fit on")
    tuning_query_images: int | None = option(_EXPECTED, None, doc="queries of the tuning validation split")
    tuning_gallery_images: int | None = option(_EXPECTED, None, doc="gallery of the tuning validation split")
    updates_per_epoch: int | None = option(_EXPECTED, None, doc="optimiser steps per final-run epoch")
    leaves: int | None = option(_EXPECTED, None, doc="leaf classes of the dataset")
    middle_groups: int | None = option(_EXPECTED, None, doc="middle-level groups of the dataset")
    high_groups: int | None = option(_EXPECTED, None, doc="high-level groups of the dataset")
    part_leaves: tuple[int, int, int] | None = option(_PER_PART, None, doc="leaves in train, val, test")
    part_middle_groups: tuple[int, int, int] | None = option(
        _PER_PART, None, doc="middle groups in train, val, test"
    )

    def declared(self) -> dict[str, Any]:
        """The counts this preset declares, by option name, in declaration order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True, kw_only=True)
class Preset:
    study: StudyConfig = section(StudyConfig)
    data: DataConfig = section(DataConfig)
    split: SplitConfig = section(SplitConfig)
    evaluation: EvaluationConfig = section(EvaluationConfig)
    factorial: FactorialConfig = section(FactorialConfig)
    geometry: GeometryConfig = section(GeometryConfig)
    temperature: TemperatureConfig = section(TemperatureConfig)
    training: TrainingConfig = section(TrainingConfig)
    compute: ComputeConfig = section(ComputeConfig)
    controls: ControlsConfig = section(ControlsConfig)
    baselines: BaselinesConfig = section(BaselinesConfig)
    expected: ExpectedConfig = section(ExpectedConfig)
    source: str = field(default="<dict>", compare=False)
    """Where the preset came from (file path or a description); not part of the configuration."""

    @property
    def name(self) -> str:
        return self.study.name

    @property
    def cells(self) -> tuple[str, ...]:
        """The arms this study trains, in the factorial's order."""
        return self.training.cells

    @property
    def design(self) -> Factorial:
        """The factorial the study declares (its cells may be a subset of its arms)."""
        return self.factorial.design

    @property
    def tuned_geometries(self) -> tuple[str, ...]:
        """Geometries whose temperature is tuned: set to `tune` and with a cell whose objective takes one."""
        return tuple(
            g.name for g in self.factorial.geometry_components
            if self.temperature.for_geometry(g.name) == TUNE and self.tuning_cell(g.name) is not None
        )

    def tuning_cell(self, geometry: str) -> str | None:
        """The arm that tunes a geometry's temperature: its Taxonomy-SupCon cell, else its first cell of a
        built-in objective that takes a temperature (the tuned value serves every such cell of the geometry)."""
        return next(iter(self.factorial.tau_cells(component("geometry", geometry), self.cells)), None)

    def to_dict(self) -> dict[str, Any]:
        """Every option, defaults included, as plain JSON types with tables in TOML section order."""
        return _document(self)

    def canonical_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    def sha256(self) -> str:
        """The study's configuration hash: SHA256 of the canonical JSON of `to_dict()`."""
        return hashlib.sha256(self.canonical_json().encode("ascii")).hexdigest()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | Path = "<dict>", recorded: bool = False) -> Preset:
        """Validate a TOML-shaped mapping; raise ConfigError listing every problem found.

        `recorded`: a preset read back from the store or a job spec. Its study.name was checked when the
        study was created, by the rule of that version; an earlier version took any non-empty name, so
        such a name is kept as recorded (the study's id and folder exist already), not refused."""
        kept = None
        if recorded:
            study = data.get("study")
            name = study.get("name") if isinstance(study, Mapping) else None
            if isinstance(study, Mapping) and isinstance(name, str) and name.strip() and name_problem(name):
                kept, data = name, {**data, "study": {**study, "name": "recorded"}}
        problems: list[str] = []
        parts = _build(cls, data, "", problems)
        if parts is not None:
            training_data = data.get("training")
            if not (isinstance(training_data, Mapping) and "cells" in training_data):
                # Left out, the cells are every arm of the factorial (the paper's four by default).
                parts["training"] = replace(parts["training"], cells=parts["factorial"].design.arms)
            _cross_check(parts, problems)
        if problems or parts is None:
            raise _config_error(source, problems)
        if kept is not None:
            parts["study"] = replace(parts["study"], name=kept)
        return cls(**parts, source=str(source))

    def with_overrides(
        self,
        *,
        epochs: int | None = None,
        seeds: Sequence[int] | None = None,
        device: str | None = None,
        dataset: str | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> Preset:
        """A validated copy with command-line style overrides; `values` maps dotted keys to values."""
        data = self.to_dict()
        updates: dict[str, Any] = dict(values or {})
        for key, value in (
            ("training.epochs", epochs),
            ("training.seeds", list(seeds) if seeds is not None else None),
            ("compute.device", device),
            ("data.dataset", dataset),
        ):
            if value is not None:
                updates[key] = value
        # The group counts and fractions are two forms of one option: an override of one replaces the other
        # (a shipped preset's counts on a user's own data: --set 'split.fractions=[0.6,0.2,0.2]').
        if any(k.startswith("factorial.") for k in updates) and "training.cells" not in updates:
            # Another factorial's arms: the cells follow it (every arm) unless the override names them.
            training = data.get("training")
            if isinstance(training, dict):
                training.pop("cells", None)
        for given, other in (("split.fractions", "split.counts"), ("split.counts", "split.fractions")):
            if given in updates and updates[given] not in (None, NONE) and other not in updates:
                updates[other] = NONE
        problems: list[str] = []
        for key, value in updates.items():
            if key in CLEARABLE_TABLES and value == NONE:
                # Every option of such a table is optional: `expected=none` clears them all at once.
                data[key] = {}
                continue
            node = data
            *parents, leaf = key.split(".")
            for i, part in enumerate(parents):
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    problems.append(
                        f"{'.'.join(parents[: i + 1])}: is an option, not a table (override {key})"
                    )
                    break
            else:
                node[leaf] = value
        # Overrides may be applied in turn (a preset's, then the command line's): say it once.
        source = self.source if self.source.endswith(OVERRIDES_SUFFIX) else self.source + OVERRIDES_SUFFIX
        if problems:
            raise _config_error(source, problems)
        return Preset.from_dict(data, source=source)


CLEARABLE_TABLES: tuple[str, ...] = ("expected",)
"""Tables whose options are all optional, so `--set TABLE=none` clears the whole table (a shipped preset's
paper counts on a user's own dataset)."""


# --- building and checking ------------------------------------------------------------------------------


def _build(cls: type, data: Any, prefix: str, problems: list[str]) -> dict[str, Any] | None:
    """Keyword arguments for `cls` from `data`, appending a message per problem; None if any."""
    if not isinstance(data, Mapping):
        where = f"{prefix} = {show(data)} ({toml_type(data)})" if prefix else f"{toml_type(data)} given"
        problems.append(f"{where}: expected a table{f' [{prefix}]' if prefix else ''}")
        return None
    options = {f.name: f for f in fields(cls) if "check" in f.metadata or "section" in f.metadata}
    ok = True
    for key in data:
        if key not in options:
            path = f"{prefix}.{key}" if prefix else str(key)
            problems.append(f"{path}: unknown key{_suggest(str(key), prefix, list(options))}")
            ok = False
    kwargs: dict[str, Any] = {}
    for name, f in options.items():
        path = f"{prefix}.{name}" if prefix else name
        if "section" in f.metadata:
            sub = _build(f.metadata["section"], data.get(name, {}), path, problems)
            if sub is None:
                ok = False
            else:
                kwargs[name] = f.metadata["section"](**sub)
            continue
        check: Check = f.metadata["check"]
        if name in data:
            value = data[name]
            try:
                kwargs[name] = check(value)
            except Invalid as exc:
                problems.append(f"{path} = {show(value)} ({toml_type(value)}): {exc}")
                ok = False
        elif f.default is MISSING:
            problems.append(f"{path}: required key is missing; expected {check.expected}")
            ok = False
    return kwargs if ok else None


def _all_paths(cls: type = Preset, prefix: str = "") -> list[str]:
    out = []
    for f in fields(cls):
        path = f"{prefix}.{f.name}" if prefix else f.name
        if "section" in f.metadata:
            out.append(path)
            out.extend(_all_paths(f.metadata["section"], path))
        elif "check" in f.metadata:
            out.append(path)
    return out


def option_keys(cls: type = Preset, prefix: str = "") -> list[str]:
    """Every option's dotted key (`training.lr`), tables left out: what `--set KEY=VALUE` accepts."""
    out = []
    for f in fields(cls):
        path = f"{prefix}.{f.name}" if prefix else f.name
        if "section" in f.metadata:
            out.extend(option_keys(f.metadata["section"], path))
        elif "check" in f.metadata:
            out.append(path)
    return out


def _suggest(key: str, prefix: str, local: list[str]) -> str:
    here = f"[{prefix}]" if prefix else "the top level"
    allowed = f"; allowed in {here}: {', '.join(local)}"
    close = difflib.get_close_matches(key, local, n=1)
    if close:
        path = f"{prefix}.{close[0]}" if prefix else close[0]
        return f"; did you mean {path!r}?{allowed}"
    # A right name in the wrong table: point to where it belongs (the shallowest table wins a tie).
    homes: dict[str, str] = {}
    for path in sorted(_all_paths(), key=lambda p: (p.count("."), p)):
        homes.setdefault(path.rsplit(".", 1)[-1], path)
    close = difflib.get_close_matches(key, list(homes), n=1)
    if close:
        return f"; did you mean {homes[close[0]]!r}?{allowed}"
    return allowed


def _cross_check(parts: dict[str, Any], problems: list[str]) -> None:
    """Rules that involve more than one option."""
    _check_factorial(parts, problems)
    split: SplitConfig = parts["split"]
    if split.protocol == "hierarchy_disjoint":
        if (split.counts is None) == (split.fractions is None):
            problems.append(
                "split: protocol = 'hierarchy_disjoint' needs exactly one of split.counts or split.fractions "
                f"(got {'both' if split.counts is not None else 'neither'}); e.g. counts = [242, 81, 81]"
            )
        if split.fractions is not None and abs(sum(split.fractions) - 1.0) > 1e-6:
            problems.append(
                f"split.fractions = {show(list(split.fractions))}: sums to {sum(split.fractions):g}; "
                "expected train, val, test fractions summing to 1"
            )
        if split.level in ("leaf", "1"):
            # Leaf-disjoint would be expressible, but the protocol's disjointness is defined on groups. A
            # leaf named otherwise (CUB's "Class") is refused at launch, against the dataset's levels.
            problems.append(
                f"split.level = {show(split.level)}: not allowed with protocol = 'hierarchy_disjoint'; "
                "expected a level above the leaf, e.g. 'middle', 'high'"
            )
    else:
        for key in ("counts", "fractions", "leaf_counts", "image_counts"):
            if getattr(split, key) is not None:
                problems.append(
                    f"split.{key} = {show(list(getattr(split, key)))}: only used with protocol = "
                    f"'hierarchy_disjoint'; remove it or set split.protocol = 'hierarchy_disjoint'"
                )
        if split.images != "all":
            problems.append(
                f"split.images = {split.images!r}: only used with protocol = 'hierarchy_disjoint' (the "
                "official protocol already keeps the official images); remove it"
            )
    training: TrainingConfig = parts["training"]
    if training.select_epoch:
        if training.selection_epochs is None and training.val_every == 0:
            problems.append(
                "training.select_epoch = true needs candidate epochs: set training.val_every > 0 or list "
                "training.selection_epochs"
            )
        late = [e for e in training.selection_epochs or () if e > training.epochs]
        if late:
            problems.append(
                f"training.selection_epochs = {show(list(training.selection_epochs or ()))}: epoch(s) "
                f"{', '.join(map(str, late))} exceed training.epochs = {training.epochs}"
            )
    else:
        for key, default in (("selection_epochs", None), ("selection_score", HIER_METRIC)):
            if getattr(training, key) != default:
                problems.append(f"training.{key}: only used with training.select_epoch = true; set it or remove this")
    if not any(w > 0 for w in training.level_weights):
        problems.append(
            f"training.level_weights = {show(list(training.level_weights))}: all zero; "
            "expected at least one weight > 0"
        )
    hier: HierConfig = parts["baselines"].hier
    if hier.recipe == HIER_AUTHORS and hier.batch_size % hier.per_class:
        problems.append(
            f"baselines.hier.batch_size = {hier.batch_size}: not a multiple of baselines.hier.per_class = "
            f"{hier.per_class}; a class-balanced batch holds per_class images of each of its classes"
        )
    tuning = parts["temperature"].tuning
    tuned = [
        g.name for g in parts["factorial"].geometry_components
        if parts["temperature"].for_geometry(g.name) == TUNE and parts["factorial"].tau_cells(g, training.cells)
    ]
    if tuned and len(tuning.candidates) < 2:
        problems.append(
            f"temperature.tuning.candidates = {show(list(tuning.candidates))}: tuning needs at least two "
            "candidates; give more, or set the temperature to a number"
        )


def _check_factorial(parts: dict[str, Any], problems: list[str]) -> None:
    """The cells are arms of the factorial (kept in its order), and every geometry whose cells take a
    temperature has one."""
    factorial: FactorialConfig = parts["factorial"]
    training: TrainingConfig = parts["training"]
    arms = factorial.design.arms
    unknown = [c for c in training.cells if c not in arms]
    if unknown:
        problems.append(
            f"training.cells = {show(list(training.cells))}: {', '.join(unknown)} "
            f"{'is not an arm' if len(unknown) == 1 else 'are not arms'} of the factorial; its arms are "
            f"{', '.join(arms)}"
        )
        return
    parts["training"] = replace(training, cells=factorial.design.order(training.cells))
    temperature: TemperatureConfig = parts["temperature"]
    for g in factorial.geometry_components:
        if temperature.for_geometry(g.name) is not None:
            continue
        taking = factorial.tau_cells(g, parts["training"].cells)
        if taking:
            problems.append(
                f"temperature.others: needed by the {g.name} cells {', '.join(taking)}; set it to a number "
                f"or {TUNE!r}"
            )
            return


def _config_error(source: str | Path, problems: list[str]) -> ConfigError:
    lines = [f"{source}: invalid preset ({len(problems)} problem{'s' if len(problems) != 1 else ''})"]
    lines += [f"  - {p}" for p in problems]
    err = ConfigError("\n".join(lines))
    err.source = str(source)  # type: ignore[attr-defined]
    err.problems = list(problems)  # type: ignore[attr-defined]
    return err


def _to_dict(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(obj):
        if "section" in f.metadata:
            out[f.name] = _to_dict(getattr(obj, f.name))
        elif "check" in f.metadata:
            value = getattr(obj, f.name)
            if value is None and f.metadata.get("omit_none"):
                continue  # an option newer than recorded studies: absent while unset, so their hash holds
            out[f.name] = f.metadata["check"].dump(value)
    return out


def _document(preset: Preset) -> dict[str, Any]:
    out = _to_dict(preset)
    if not out["factorial"]:
        del out["factorial"]  # the paper's 2 × 2: absent, so every recorded study's hash holds
    return out
