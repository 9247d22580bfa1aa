"""Seeded synthetic feature sets with real hierarchical structure, for the demo and for benchmarks.

The demo and CUB-sized sets have three levels (`SyntheticConfig`, whose fields are stored as each set's
params, so it never changes); `DeepSyntheticConfig` builds the same kind of data on a tree of any depth
(the built-in `tree2`, `tree5`, `tree7` and `tree12`).

A sample of leaf l (middle m, high h) is
    x = s_h * U_h[h] + s_m * U_m[m] + s_l * U_l[l] + s_n * sum_k z_k B[k] + s_e * e,
with random near-unit direction rows U_*, a low-rank nuisance basis B (pose, background: shared by all
classes and larger than the fine signal, as in frozen image features) with z ~ N(0, 1), and isotropic
noise e. Leaves are fairly easy to retrieve; strict middle and high retrieval are hard on raw features
because the nuisance dominates their signal, yet a learned projection that knows the taxonomy can
recover them.

Generation uses only gathers and elementwise arithmetic (no BLAS reductions), so a config gives the same
bits on every machine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from hierconsole.datasets.featureset import FeatureSet
from hierconsole.errors import ConfigError
from hierconsole.levels import MAX_LEVELS, MIN_LEVELS, LevelError, Levels
from hierconsole.taxonomy import Taxonomy
from hierconsole.vocabulary import CUB_LEVEL_NAMES, DEFAULT_LEVEL_NAMES, SYNTHETIC_DATASETS


@dataclass(frozen=True)
class SyntheticConfig:
    name: str = "demo"
    seed: int = 0
    n_leaves: int = 40
    n_middles: int = 16
    n_highs: int = 5
    n_singleton_middles: int = 6
    n_train: int = 1200
    n_test: int = 1000
    dim: int = 768
    high_scale: float = 1.0
    middle_scale: float = 0.8
    leaf_scale: float = 1.0
    confusion_scale: float = 0.8
    confusion_terms: int = 3
    nuisance_scale: float = 0.5
    nuisance_rank: int = 12
    noise_scale: float = 0.6
    level_names: tuple[str, ...] = DEFAULT_LEVEL_NAMES

    def __post_init__(self) -> None:
        problems = []
        if not 1 <= self.n_highs <= self.n_middles <= self.n_leaves:
            problems.append("need 1 <= n_highs <= n_middles <= n_leaves")
        multi = self.n_middles - self.n_singleton_middles
        if not 0 <= self.n_singleton_middles <= self.n_middles:
            problems.append("n_singleton_middles must lie between 0 and n_middles")
        elif (
            multi == 0 and self.n_leaves != self.n_middles
        ) or self.n_leaves - self.n_singleton_middles < 2 * multi:
            problems.append("too few leaves for the non-singleton middles to hold two each")
        if self.n_train < self.n_leaves or self.n_test < self.n_leaves:
            problems.append("n_train and n_test must give every leaf at least one sample")
        if self.dim < 1 or self.nuisance_rank < 0:
            problems.append("dim must be positive and nuisance_rank non-negative")
        if problems:
            raise ConfigError("synthetic config: " + "; ".join(problems))


DEMO_CONFIG = SyntheticConfig()
"""Small enough that the demo factorial (4 cells x 3 seeds, ~25 epochs) trains in about a minute on 2 CPUs."""

CUB_SIZED_CONFIG = SyntheticConfig(
    name="cub-sized",
    n_leaves=200,
    n_middles=124,
    n_highs=37,
    n_singleton_middles=87,
    n_train=5994,
    n_test=5794,
    level_names=CUB_LEVEL_NAMES,
)
"""CUB-200-2011's shape: 5,994 train / 5,794 test, 200 classes, 124 genera (87 singletons), 37 families."""

def make_taxonomy(config: SyntheticConfig, rng: np.random.Generator) -> Taxonomy:
    """A random tree of the configured size; leaf indices run middle by middle, middles high by high."""
    # Middles per high: one each, the rest spread with uneven weights so some highs are large.
    per_high = 1 + rng.multinomial(config.n_middles - config.n_highs, rng.dirichlet(np.ones(config.n_highs)))
    middle_high = np.repeat(np.arange(config.n_highs), per_high)
    # Leaves per middle: singletons hold one, every other middle at least two.
    singles = rng.permutation(config.n_middles)[: config.n_singleton_middles]
    multi = np.setdiff1d(np.arange(config.n_middles), singles)
    per_middle = np.ones(config.n_middles, dtype=np.int64)
    if len(multi):
        spare = config.n_leaves - config.n_singleton_middles - 2 * len(multi)
        per_middle[multi] = 2 + rng.multinomial(spare, rng.dirichlet(np.full(len(multi), 2.0)))
    leaf_middle = np.repeat(np.arange(config.n_middles), per_middle)
    return Taxonomy.three(
        leaves=tuple(f"leaf_{i:03d}" for i in range(config.n_leaves)),
        middles=tuple(f"middle_{i:03d}" for i in range(config.n_middles)),
        highs=tuple(f"high_{i:02d}" for i in range(config.n_highs)),
        leaf_middle=leaf_middle,
        middle_high=middle_high,
        level_names=config.level_names,
    )


def _per_leaf(n: int, n_leaves: int, rng: np.random.Generator) -> np.ndarray:
    """Leaf of each of n samples: as even as possible, the remainder on random leaves."""
    counts = np.full(n_leaves, n // n_leaves, dtype=np.int64)
    counts[rng.permutation(n_leaves)[: n % n_leaves]] += 1
    return rng.permutation(np.repeat(np.arange(n_leaves), counts))


def _directions(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    # Gaussian rows scaled by 1/sqrt(dim) have norm close to 1 and are nearly orthogonal in high dimension.
    return rng.standard_normal((n, dim), dtype=np.float32) * np.float32(1.0 / np.sqrt(dim))


def make_synthetic(config: SyntheticConfig | DeepSyntheticConfig = DEMO_CONFIG) -> FeatureSet:
    """A FeatureSet (kind "synthetic") with an official train/test split; bit-identical for a config."""
    if isinstance(config, DeepSyntheticConfig):
        return make_deep_synthetic(config)
    rng = np.random.default_rng(config.seed)
    tax = make_taxonomy(config, rng)
    leaf = np.concatenate(
        [_per_leaf(config.n_train, tax.n_leaves, rng), _per_leaf(config.n_test, tax.n_leaves, rng)]
    )
    split = np.concatenate([np.zeros(config.n_train, np.int8), np.full(config.n_test, 2, np.int8)])
    labels = tax.labels(leaf)
    d = config.dim
    f32 = np.float32
    u_high = _directions(rng, tax.counts[2], d)
    u_middle = _directions(rng, tax.counts[1], d)
    u_leaf = _directions(rng, tax.n_leaves, d)
    basis = _directions(rng, config.nuisance_rank, d)
    x = f32(config.high_scale) * u_high[labels[:, 2]]
    x += f32(config.middle_scale) * u_middle[labels[:, 1]]
    x += f32(config.leaf_scale) * u_leaf[labels[:, 0]]
    _confuse_and_perturb(x, rng, u_leaf, basis, config)
    return _synthetic_set(config, x, leaf, split, tax)


def _confuse_and_perturb(
    x: np.ndarray, rng: np.random.Generator, u_leaf: np.ndarray, basis: np.ndarray, config: SyntheticConfig | DeepSyntheticConfig
) -> None:
    """Add, in place and in this order of draws, confusion between leaves, a low-rank nuisance and noise."""
    f32 = np.float32
    n, d = x.shape
    # Confusion lies inside the leaf subspace, so no projection can remove it: leaves stay imperfect.
    others = rng.integers(0, len(u_leaf), size=(n, config.confusion_terms))
    weights = rng.standard_normal((n, config.confusion_terms), dtype=np.float32) * f32(config.confusion_scale)
    for t in range(config.confusion_terms):
        x += weights[:, t : t + 1] * u_leaf[others[:, t]]
    z = rng.standard_normal((n, config.nuisance_rank), dtype=np.float32) * f32(config.nuisance_scale)
    for k in range(config.nuisance_rank):
        x += z[:, k : k + 1] * basis[k]
    x += _directions(rng, n, d) * f32(config.noise_scale)


def _synthetic_set(
    config: SyntheticConfig | DeepSyntheticConfig, x: np.ndarray, leaf: np.ndarray, split: np.ndarray, tax: Taxonomy
) -> FeatureSet:
    """The feature set of generated data; its config is its params (the names as a list, like JSON)."""
    params = asdict(config)
    for key in ("level_sizes", "level_names"):
        if key in params:
            params[key] = list(params[key])
    return FeatureSet(
        name=config.name,
        features=x,
        ids=np.array([f"{config.name}-{i:05d}" for i in range(len(x))], dtype=object),
        leaf=leaf,
        split=split,
        taxonomy=tax,
        kind="synthetic",
        sources={},
        params=params,
    )


@dataclass(frozen=True)
class DeepSyntheticConfig:
    """Synthetic data on a tree of K levels (2..12): the demo's recipe with one direction per node at
    every level, the coarser levels weighted more (`top_scale`, times `scale_decay` per level down)."""

    name: str
    level_sizes: tuple[int, ...]
    """Nodes per level, leaf first; each level strictly smaller than the one below, so every level has
    groups of two or more children and therefore valid strict queries."""
    level_names: tuple[str, ...]
    seed: int = 0
    n_train: int = 800
    n_test: int = 700
    dim: int = 64
    top_scale: float = 1.0
    scale_decay: float = 0.85
    leaf_scale: float = 1.0
    confusion_scale: float = 0.8
    confusion_terms: int = 3
    nuisance_scale: float = 0.5
    nuisance_rank: int = 8
    noise_scale: float = 0.6

    def __post_init__(self) -> None:
        problems = []
        k = len(self.level_sizes)
        if not MIN_LEVELS <= k <= MAX_LEVELS:
            problems.append(f"{k} levels: a tree has {MIN_LEVELS} to {MAX_LEVELS}")
        if len(self.level_names) != k:
            problems.append(f"{k} level sizes but {len(self.level_names)} level names")
        else:
            try:
                Levels.of(self.level_names)
            except LevelError as exc:
                problems.append(str(exc))
        sizes = list(self.level_sizes)
        if any(n < 1 for n in sizes) or any(a <= b for a, b in zip(sizes, sizes[1:], strict=False)):
            problems.append("level_sizes must shrink strictly from the leaf to the top (and be >= 1)")
        if sizes and (self.n_train < sizes[0] or self.n_test < sizes[0]):
            problems.append("n_train and n_test must give every leaf at least one sample")
        if self.dim < 1 or self.nuisance_rank < 0:
            problems.append("dim must be positive and nuisance_rank non-negative")
        if problems:
            raise ConfigError(f"synthetic config {self.name!r}: " + "; ".join(problems))

    @property
    def levels(self) -> Levels:
        return Levels.of(self.level_names)

    def scales(self) -> tuple[float, ...]:
        """The weight of each level's node direction, leaf first."""
        k = len(self.level_sizes)
        return (self.leaf_scale, *(self.top_scale * self.scale_decay ** (k - 1 - j) for j in range(1, k)))


def make_deep_taxonomy(config: DeepSyntheticConfig, rng: np.random.Generator) -> Taxonomy:
    """A random tree of the configured sizes: every node holds at least one child, the rest are spread
    with uneven weights; a level's indices run parent by parent."""
    sizes = config.level_sizes
    parents = []
    for j in range(len(sizes) - 1):
        per_parent = 1 + rng.multinomial(sizes[j] - sizes[j + 1], rng.dirichlet(np.ones(sizes[j + 1])))
        parents.append(np.repeat(np.arange(sizes[j + 1]), per_parent))
    codes = config.levels.codes
    nodes = tuple(
        tuple(f"{code}_{i:0{len(str(n - 1))}d}" for i in range(n)) for code, n in zip(codes, sizes, strict=True)
    )
    return Taxonomy(nodes, tuple(parents), config.level_names)


def make_deep_synthetic(config: DeepSyntheticConfig) -> FeatureSet:
    """A K-level FeatureSet (kind "synthetic") with an official train/test split; bit-identical for a
    config. The demo's generator with a node direction per level (coarse first), then confusion inside
    the leaf subspace, a shared nuisance basis and isotropic noise."""
    rng = np.random.default_rng(config.seed)
    tax = make_deep_taxonomy(config, rng)
    leaf = np.concatenate(
        [_per_leaf(config.n_train, tax.n_leaves, rng), _per_leaf(config.n_test, tax.n_leaves, rng)]
    )
    split = np.concatenate([np.zeros(config.n_train, np.int8), np.full(config.n_test, 2, np.int8)])
    labels = tax.labels(leaf)
    d, n = config.dim, len(leaf)
    f32 = np.float32
    directions = [_directions(rng, count, d) for count in tax.counts]
    basis = _directions(rng, config.nuisance_rank, d)
    x = np.zeros((n, d), dtype=np.float32)
    for level in reversed(range(tax.k)):
        x += f32(config.scales()[level]) * directions[level][labels[:, level]]
    _confuse_and_perturb(x, rng, directions[0], basis, config)
    return _synthetic_set(config, x, leaf, split, tax)


INAT_RANK_NAMES: tuple[str, ...] = ("Species", "Genus", "Family", "Order", "Class", "Phylum", "Kingdom")

DEEP_CONFIGS: tuple[DeepSyntheticConfig, ...] = (
    DeepSyntheticConfig(name="tree2", level_sizes=(40, 8), level_names=("Leaf", "Group")),
    DeepSyntheticConfig(name="tree5", level_sizes=(60, 30, 14, 6, 3), level_names=INAT_RANK_NAMES[:5]),
    DeepSyntheticConfig(name="tree7", level_sizes=(80, 48, 28, 16, 9, 5, 2), level_names=INAT_RANK_NAMES),
    DeepSyntheticConfig(
        name="tree12",
        level_sizes=(96, 80, 66, 54, 44, 35, 27, 20, 14, 9, 5, 2),
        level_names=tuple(f"Level {i}" for i in range(1, 13)),
    ),
)
"""Small deep trees (1,500 samples, 64-D) on which the demo preset runs in about the demo's time."""

BUILT_IN: dict[str, SyntheticConfig | DeepSyntheticConfig] = dict(
    zip(SYNTHETIC_DATASETS, (DEMO_CONFIG, CUB_SIZED_CONFIG, *DEEP_CONFIGS), strict=True)
)
"""The built-in synthetic data by the name a preset gives after `synthetic:`."""
