"""A hierconsole home opened from Python: every table the CLI prints, as polars frames.

Each call opens the store read-only for the duration of that call and closes it again, exactly as a CLI
read command does (`Store(read_only=True)`): a notebook never keeps the DuckDB file open between cells,
so a run (the console, `hierconsole run`, or `Home.run`) can take and keep the store's writer lock, and
while it holds it every call here reads the live snapshot it publishes (`Home.source` says which).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from hierconsole.errors import HierconsoleError, StoreBusyError
from hierconsole.locations import DB_NAME, db_path, resolve_home
from hierconsole.present import frames
from hierconsole.study import read
from hierconsole.study.db.storage import Store
from hierconsole.study.read.contrasts import DEFAULT_METRIC, contrast_family, metric_columns, parse_arm_pair
from hierconsole.study.read.effects import EffectsView, parse_sesoi
from hierconsole.study.read.families import (
    family_contrasts,
    family_effects,
    get_family,
    is_family,
    list_families,
    resolve_reference,
)
from hierconsole.study.read.report_inputs import is_family_ref
from hierconsole.vocabulary import HIER_METRIC

if TYPE_CHECKING:
    from hierconsole.notebook.launch import RunHandle


def open_home(path: str | os.PathLike[str] | None = None, *, writable: bool = False, create: bool = False) -> Home:
    """The hierconsole home at `path` (default: $HIERCONSOLE_HOME, else the user data dir), read-only
    unless `writable` (needed only to launch runs with `Home.run`). Nothing is created, unless `create`
    with `writable` starts a new, empty home there.

    >>> import hierconsole as hc
    >>> home = hc.open_home("~/hierconsole-home")       # doctest: +SKIP
    >>> home.effects("demo").filter(seed=42)             # doctest: +SKIP

    Raises `HierconsoleError` naming the folder when it does not exist or holds no store.
    """
    if create and not writable:
        raise HierconsoleError("open_home(create=True) starts a new home, which needs writable=True too")
    home = resolve_home(path, create=False)
    if not home.exists():
        if not create:
            raise HierconsoleError(
                f"{home} does not exist, so it is not a hierconsole home\n  fix: pass the folder you give "
                "hierconsole as --home (or HIERCONSOLE_HOME), or open_home(path, writable=True, create=True) "
                "to start a new home there"
            )
        resolve_home(home, create=True)
    if not home.is_dir():
        raise HierconsoleError(f"{home} is a file, not a hierconsole home folder\n  fix: pass the folder holding {DB_NAME}")
    if not db_path(home).exists() and not create:
        raise HierconsoleError(
            f"{home} is not a hierconsole home: it holds no {DB_NAME}\n  fix: pass the folder you give "
            "hierconsole as --home (or HIERCONSOLE_HOME), or open_home(path, writable=True, create=True) to "
            "start a new home there"
        )
    if writable and not os.access(home, os.W_OK):
        raise HierconsoleError(
            f"{home} is read-only here, so it cannot be opened writable\n  fix: open it read-only "
            "(open_home(path)) to read it, or copy the home somewhere writable to run studies in it"
        )
    opened = Home(home, writable=writable)
    if db_path(home).exists():
        opened.check()
    return opened


class Home:
    """An open hierconsole home (see `open_home`). Every reading method takes a study by id, unique id
    prefix or name (None: the newest study), as the CLI does, and returns a polars DataFrame (pandas:
    `.to_pandas()`)."""

    def __init__(self, path: Path, *, writable: bool = False):
        self.path = path
        """The home folder."""
        self.writable = writable
        """Whether `run` may launch studies here."""
        self.source: str | None = None
        """What the last call read: the store file, or the live snapshot of a run that holds it (its PID
        and age)."""

    def __repr__(self) -> str:
        return f"Home({str(self.path)!r}, {'writable' if self.writable else 'read-only'})"

    @contextmanager
    def _reading(self) -> Iterator[Store]:
        with Store(self.path, read_only=True) as store:
            self.source = store.source
            yield store

    def check(self) -> None:
        """Open the store once: a file that is not a hierconsole store (or a newer version's) says so now.
        A store a run holds that has no snapshot yet is a home all the same."""
        try:
            with self._reading():
                pass
        except StoreBusyError:
            pass

    # -- studies and jobs ----------------------------------------------------------------------------
    def studies(self) -> pl.DataFrame:
        """Every study, oldest first: study_id, name, dataset_id, phase, created_at, jobs, jobs_finished
        (`hierconsole studies`).

        >>> home.studies().select("study_id", "phase")   # doctest: +SKIP
        """
        with self._reading() as store:
            return frames.studies_frame(read.list_studies(store))

    def study_id(self, study: str | None = None) -> str:
        """The id of a study given by id, unique prefix or name (None: the newest)."""
        with self._reading() as store:
            return _study_ref(store, study)

    def runs(self, study: str | None = None) -> pl.DataFrame:
        """The jobs of a study (None: of every study) with their states and progress, one row per job
        (`hierconsole runs [STUDY]`); `shown_state` says `orphaned` for a job no process drives."""
        with self._reading() as store:
            study_id = _study_ref(store, study) if study is not None else None
            return frames.jobs_frame(read.job_rows(store, study_id))

    def audits(self, study: str | None = None) -> pl.DataFrame:
        """The fairness and leakage checks of a study (`hierconsole audit`): the recorded ones, or, before
        they are recorded, each evaluated now (`recorded` False; nothing is written)."""
        with self._reading() as store:
            study_id = _study_ref(store, study)
            checks, recorded = read.current_audits(store, study_id)
        return frames.audits_frame(study_id, checks, recorded=recorded)

    # -- results -------------------------------------------------------------------------------------
    def levels(self, study: str | None = None) -> pl.DataFrame:
        """The levels of a study's taxonomy, leaf first: position (1 = leaf), code (the `level` of
        `metrics` and the `{code}_` of every metric column, e.g. `genus_mAP`), name (the data's own),
        hier (whether the hier score averages it) and trained (whether the loss sees it). Three-level data
        keeps the codes leaf, middle, high whatever its names."""
        with self._reading() as store:
            plan = read.study_levels(store, _study_ref(store, study))
        levels = plan.levels
        return pl.DataFrame(
            {
                "position": list(range(1, levels.k + 1)),
                "code": list(levels.codes),
                "name": list(levels.names),
                "hier": [code in plan.hier for code in levels.codes],
                "trained": [code in plan.trained for code in levels.codes],
            },
            schema={"position": pl.Int64, "code": pl.String, "name": pl.String, "hier": pl.Boolean, "trained": pl.Boolean},
        )

    def metrics(self, study: str | None = None) -> pl.DataFrame:
        """Every stored test metric of a study, long: run_id, seed, arm, perturbation (the Q/G split),
        aggregation, level (a level code, see `levels`), metric, value, posthoc (`hierconsole export
        metrics`)."""
        return self.table("metrics", study)

    def per_seed(self, study: str | None = None) -> pl.DataFrame:
        """The per-seed table of a study: arm, seed, one column per metric, Q/G perturbations averaged
        within the seed, as the effects are computed from it: every level's `{code}_mAP` leaf to top (see
        `levels`), `hier_mAP`, then `{code}_R@K`."""
        with self._reading() as store:
            return read.per_seed(store, _study_ref(store, study))

    def arms(self, study: str | None = None, metrics: Sequence[str] | None = None) -> pl.DataFrame:
        """The arm table: arm, metric, mean, sd, n (seeds), the trained cells then the baselines
        (`"arms"` of `hierconsole effects --json`)."""
        return self._effects_view(study, metrics).arms

    def effects(
        self,
        study: str | None = None,
        metrics: Sequence[str] | None = None,
        *,
        summary: bool = False,
        sesoi: float | None = None,
    ) -> pl.DataFrame:
        """The paired simple effects and the interaction (group `effects`) and each cell against each
        baseline (group `baseline_contrasts`), per metric, as `hierconsole effects STUDY --json` holds them.

        Long: one row per (group, metric, effect, seed) with that seed's `value`, and beside it the
        summary over seeds (mean, sd, positive_seeds, n_seeds, the t and bootstrap intervals, sign-flip p,
        seeds to resolve, the Holm- and BH-adjusted p over its family; with `sesoi`, the TOST and its
        verdict: `effects STUDY --sesoi DELTA`), the same on each seed's row. `summary=True`: one row per
        effect, no seeds.

        >>> fx = home.effects("demo")                                        # doctest: +SKIP
        >>> fx.filter(metric="hier_mAP", effect="loss_H")["value"].mean()   # doctest: +SKIP
        """
        view = self._effects_view(study, metrics, parse_sesoi(None if sesoi is None else str(sesoi), "sesoi="))
        return frames.effects_long(
            {"effects": view.effects, "baseline_contrasts": view.baseline_contrasts}, summary=summary
        )

    def _effects_view(
        self, study: str | None, metrics: Sequence[str] | None, sesoi: float | None = None
    ) -> EffectsView:

        with self._reading() as store:
            if study is not None and is_family_ref(store, study):
                raise HierconsoleError(
                    f"{study!r} is a family, not a study\n  fix: its members' pooled effects are "
                    f"home.family_effects({study!r}); one member's are home.effects('FAMILY:member')"
                )
            return read.study_effects(store, _study_ref(store, study), metrics, sesoi=sesoi)

    def table(self, name: str, study: str | None = None) -> pl.DataFrame:
        """Any table `hierconsole export NAME --study STUDY` writes (runs, metrics, arms, effects, recall,
        deviation, redistribution, headline, variance, audits, tuning), with full precision."""
        from hierconsole.study.read.results import check_table

        check_table(name)
        with self._reading() as store:
            return read.table_frame(store, name, _study_ref(store, study))

    # -- across studies ------------------------------------------------------------------------------
    def contrast(
        self,
        a: str,
        b: str | None = None,
        *,
        metric: str | None = None,
        arms: str | tuple[str, str] | None = None,
        summary: bool = False,
        sesoi: float | None = None,
    ) -> pl.DataFrame:
        """metric(A, arm_a, seed) - metric(B, arm_b, seed) per level, paired by training seed
        (`hierconsole contrast A B --json`); with only `a` a family, every contrast it declares
        (`hierconsole contrast FAMILY --json`). Studies as ids, names or `FAMILY:member`; `arms` as
        "H_S:E_S" (default: every arm both train); `metric` hier_mAP (the default), mAP or R@K. Long like `effects`, keyed by contrast, arm pair, level.

        >>> home.contrast("fam:curved", "fam:flat", arms="H_S:E_S", summary=True)   # doctest: +SKIP
        """
        metric = metric or DEFAULT_METRIC
        metric_columns(metric)
        delta = parse_sesoi(None if sesoi is None else str(sesoi), "sesoi=")
        pair = [parse_arm_pair(arms) if isinstance(arms, str) else arms] if arms is not None else None
        with self._reading() as store:
            if b is None:
                if not is_family(store, a):
                    raise HierconsoleError(
                        f"{a!r} is not a family in the store\n  fix: give two studies (home.contrast(A, B)) "
                        "or a family name (see home.families())"
                    )
                if pair is not None:
                    raise HierconsoleError("arms= applies to home.contrast(A, B); a family declares its arms")
                _, contrasts = family_contrasts(store, a, metric=metric, sesoi=delta)
            else:
                sa, sb = resolve_reference(store, a), resolve_reference(store, b)
                contrasts = [contrast_family(store, sa, sb, metric=metric, arms=pair, sesoi=delta)]
        return frames.contrasts_long(contrasts, summary=summary)

    def families(self) -> pl.DataFrame:
        """Every family's members, oldest family first (`hierconsole families`)."""
        with self._reading() as store:
            found = list_families(store)
        return frames.families_frame(found)

    def family(self, name: str) -> pl.DataFrame:
        """One family's members in its order: member, study_id, phase, jobs, jobs_finished and the member's
        overrides (`hierconsole families FAMILY`)."""
        with self._reading() as store:
            return frames.families_frame([get_family(store, name)])

    def family_effects(self, name: str, *, metric: str = HIER_METRIC, summary: bool = False) -> pl.DataFrame:
        """Each member's effects (averaged over its seeds) pooled with the member as the unit, as
        `hierconsole effects FAMILY --json` holds them: one row per (effect, member), or per effect with
        `summary=True`."""
        with self._reading() as store:
            family, pooled = family_effects(store, name, metric=metric)
        return frames.pooled_long(family.family_id, pooled, summary=summary)

    def outer_arms(self, name: str, *, gains: bool = False) -> pl.DataFrame:
        """An outer-split family's arms, one row per (arm, metric) with a column per split, mean and SD
        over splits (`hierconsole export outer-arms --family NAME`); `gains=True`: its paired gains per
        split (`export outer-gains`)."""
        from hierconsole.study.read.families import family_outer_frame

        with self._reading() as store:
            return family_outer_frame(store, name, gains=gains)

    # -- launching -----------------------------------------------------------------------------------
    def run(
        self,
        preset: str | os.PathLike[str],
        *,
        dataset: str | None = None,
        parallel: int | None = None,
        gpus: Sequence[str] | None = None,
        values: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> RunHandle:
        """Create a study from `preset` (a shipped name or a TOML file) and run it in the background, as
        `hierconsole run PRESET` does; returns at once with a `RunHandle` (`.progress()`, `.wait()`,
        `.cancel()`). Needs `open_home(path, writable=True)`.

        Overrides as `hierconsole run` takes them: `epochs=`, `seeds=`, `device=`, any preset option as
        `section__option=` (e.g. `training__lr=1e-4`) or dotted in `values={"training.lr": 1e-4}`.

        >>> home = hc.open_home("~/hc", writable=True)                  # doctest: +SKIP
        >>> job = home.run("demo", epochs=2, seeds=[42])                # doctest: +SKIP
        >>> job.wait(); home.effects(job.study_id, summary=True)        # doctest: +SKIP
        """
        if not self.writable:
            raise HierconsoleError(
                f"{self.path} is open read-only, so nothing can be run in it\n  fix: "
                f"hc.open_home({str(self.path)!r}, writable=True)"
            )
        from hierconsole.notebook.launch import launch  # the launcher's modules only when something runs

        return launch(self, str(preset), dataset=dataset, parallel=parallel, gpus=gpus, values=values, **overrides)


def _study_ref(store: Store, ref: str | None) -> str:
    """A study from an id, prefix, name, `FAMILY:member`, or None (the newest)."""
    if ref is not None and ":" in ref:
        return resolve_reference(store, ref)
    return read.resolve_study(store, ref)
