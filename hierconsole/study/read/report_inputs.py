"""What a study's or a family's figures and report show, read from the store in one place
(`study.analysis.report_inputs` holds the containers; `present.report` draws and lays them out)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from hierconsole import __version__
from hierconsole.config import load_preset
from hierconsole.config.family import flatten
from hierconsole.contract.events import EventKind
from hierconsole.datasets.featureset import file_sha256
from hierconsole.errors import ConfigError, HierconsoleError, NotFoundError
from hierconsole.levels import PAPER_LEVELS, LevelPlan
from hierconsole.study.analysis.arms import arm_table
from hierconsole.study.analysis.effects import SimpleEffects, omitted_text, simple_effects
from hierconsole.study.analysis.headline import headline
from hierconsole.study.analysis.outer_arms import OuterArmsView
from hierconsole.study.analysis.redistribution import Redistribution, can_redistribute, redistribution
from hierconsole.study.analysis.report_inputs import FamilyInputs as FamilyInputs
from hierconsole.study.analysis.report_inputs import MemberInputs, StudyInputs
from hierconsole.study.db.catalog import study_levels
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.db.views import sql_list
from hierconsole.study.read.audits import current_audits
from hierconsole.study.read.families import contrasts_so_far, family_effects, get_family, outer_arms_so_far
from hierconsole.study.read.results import (
    aggregations,
    baselines,
    per_seed,
    registered_aggregation,
    tuning_frame,
    variance,
)
from hierconsole.vocabulary import HIER_METRIC, MAP, POINCARE, JobKind, Phase, hier_score

# What the preset records about the run rather than the protocol: never reported as an override.
_NOT_PROTOCOL = ("study.name", "study.description")


def _shipped(name: str) -> dict[str, Any] | None:
    try:
        return flatten(load_preset(name).to_dict())
    except (ConfigError, NotFoundError, HierconsoleError):
        return None


def _overrides(registered: dict[str, Any], shipped: dict[str, Any] | None) -> dict[str, Any]:
    if shipped is None:
        return {}
    flat = flatten(registered)
    return {k: v for k, v in flat.items() if k not in _NOT_PROTOCOL and shipped.get(k, object()) != v}


def _member_of(store: Store, study_id: str) -> tuple[str, str, str, dict[str, Any]] | None:
    """(family name, member, base preset, the member's overrides) when the study is a family member."""
    row = store.one(
        "SELECT f.name, m.member, f.definition, m.overrides FROM family_members m JOIN families f USING (family_id) "
        "WHERE m.study_id = ?",
        [study_id],
    )
    if row is None:
        return None
    return row[0], row[1], json.loads(row[2]).get("base", ""), json.loads(row[3])


def _workers(store: Store, study_id: str) -> list[dict[str, Any]]:
    """The distinct worker settings of a study's jobs (device, threads, determinism, versions), each with
    the number of worker starts that reported them."""
    rows = store.rows(
        "SELECT e.payload FROM events e JOIN jobs j USING (job_id) WHERE j.study_id = ? AND e.kind = ? "
        "ORDER BY e.ts, e.key",
        [study_id, EventKind.START],
    )
    keys = ("device", "device_name", "threads", "deterministic", "cublas_workspace", "float32_matmul",
            "torch_version", "cuda_version")
    seen: dict[str, dict[str, Any]] = {}
    for (payload,) in rows:
        record = {k: v for k, v in json.loads(payload).items() if k in keys}
        key = json.dumps(record, sort_keys=True)
        seen.setdefault(key, {**record, "starts": 0})["starts"] += 1
    return list(seen.values())


def provenance(store: Store, study_id: str) -> dict[str, Any]:
    """Where a study's numbers come from: hierconsole's version, the dataset's and splits' hashes (and the
    extraction's weights, when the features were made by `hierconsole extract`), the preset and lock
    hashes, the seeds, and every worker's device, threads, determinism settings and versions."""
    info = get_study(store, study_id)
    ds = store.dicts(
        "SELECT dataset_id, kind, n_samples, dim, sha256, taxonomy_sha256, sources, params FROM datasets "
        "WHERE dataset_id = ?",
        [info.dataset_id],
    )
    dataset: dict[str, Any] = {}
    if ds:
        d = ds[0]
        params = json.loads(d["params"])
        dataset = {
            "id": d["dataset_id"],
            "kind": d["kind"],
            "samples": d["n_samples"],
            "dim": d["dim"],
            "sha256": d["sha256"],
            "taxonomy_sha256": d["taxonomy_sha256"],
            "sources": json.loads(d["sources"]),
            "extraction": params.get("extraction"),
        }
    lock = store.one("SELECT lock_sha256, created_at, locked_at, test_first_read_at FROM studies WHERE study_id = ?", [study_id])
    # The files' own hashes, as the report's caption says (`sha256sum` checks them): the recorded `sha256`
    # is the drawn split's, and the final-train file holds the development indices under the protocol's.
    splits = {
        role: file_sha256(store.home / path) if (store.home / path).is_file() else "missing"
        for role, path in store.rows("SELECT role, path FROM splits WHERE study_id = ? ORDER BY role", [study_id])
    }
    return {
        "hierconsole": __version__,
        "dataset": dataset,
        "preset_sha256": info.preset_sha256,
        "lock_sha256": lock[0] if lock else None,
        "created_at": str(lock[1]) if lock and lock[1] else None,
        "locked_at": str(lock[2]) if lock and lock[2] else None,
        "test_first_read_at": str(lock[3]) if lock and lock[3] else None,
        "training_seeds": list(info.preset.training.seeds),
        "qg_seeds": list(info.preset.evaluation.qg_seeds),
        "splits": splits,
        "threads_per_worker": info.preset.compute.threads_per_worker,
        "workers": _workers(store, study_id),
    }


def training_curves(store: Store, study_id: str) -> pl.DataFrame:
    """seed, arm, epoch, train_loss of a study's final runs."""
    return store.frame(
        "SELECT r.seed, r.arm, e.epoch, e.train_loss FROM runs r JOIN epochs e USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = ? ORDER BY r.seed, r.arm, e.epoch",
        [study_id, JobKind.FINAL],
    )


def validation_curves(store: Store, study_id: str) -> pl.DataFrame:
    """seed, arm, epoch, score: the hier score (`vocabulary.hier_score` of the study's hier levels' mAP) of
    each validation pass of a study's final runs where every hier level has a value, under its registered
    aggregation."""
    hier = study_levels(store, study_id).hier
    rows = store.rows(
        "SELECT r.seed, r.arm, v.epoch, v.level, v.value FROM runs r JOIN val_metrics v USING (run_id) "
        f"WHERE r.study_id = ? AND r.kind = ? AND v.aggregation = ? AND v.metric = ? AND v.level IN ({sql_list(hier)}) "
        "AND v.value IS NOT NULL ORDER BY r.seed, r.arm, v.epoch",
        [study_id, JobKind.FINAL, registered_aggregation(store, study_id), MAP],
    )
    passes: dict[tuple[int, str, int], dict[str, float]] = {}
    for seed, arm, epoch, level, value in rows:
        passes.setdefault((seed, arm, epoch), {})[level] = value
    schema = {"seed": pl.Int64, "arm": pl.String, "epoch": pl.Int64, "score": pl.Float64}
    scored = [
        {"seed": seed, "arm": arm, "epoch": epoch, "score": hier_score(by_level, hier=hier)}
        for (seed, arm, epoch), by_level in passes.items()
        if len(by_level) == len(hier)
    ]
    return pl.DataFrame(scored, schema=schema).sort("seed", "arm", "epoch")


def _evaluated(store: Store, study_id: str, aggregation: str | None = None) -> pl.DataFrame | None:
    try:
        return per_seed(store, study_id, aggregation)
    except HierconsoleError:
        return None


def study_inputs(store: Store, study_id: str) -> StudyInputs:
    """Everything the figures and the report of one study show."""
    info = get_study(store, study_id)
    plan = study_levels(store, study_id)
    member = _member_of(store, study_id)
    registered = info.preset.to_dict()
    if member is not None:
        preset_name: str | None = member[2]
        overrides = {**_overrides(registered, _shipped(member[2])), **member[3]}
    else:
        shipped = _shipped(info.preset.name)
        preset_name = info.preset.name if shipped is not None else None
        overrides = _overrides(registered, shipped)
    table = _evaluated(store, study_id)
    base = baselines(store, study_id) if table is not None else None
    effects: SimpleEffects = {}
    arms = redist = var = None
    omitted = None
    posthoc: dict[str, SimpleEffects] = {}
    if table is not None:
        effects = simple_effects(table, source=f"study {study_id}", baselines=base)
        omitted = omitted_text(table["arm"].to_list())
        arms = arm_table(table, source=f"study {study_id}", baselines=base)
        every_level = all(f"{level}_{MAP}" in table.columns for level in plan.levels.codes)
        redist = (
            redistribution(table, MAP, source=f"study {study_id}", levels=plan.levels)
            if every_level and can_redistribute(table)
            else None
        )
        var = variance(store, study_id)
        registered_agg = registered_aggregation(store, study_id)
        for agg in aggregations(store, study_id):
            if agg != registered_agg:
                other = _evaluated(store, study_id, agg)
                if other is not None:
                    posthoc[agg] = simple_effects(other, source=f"study {study_id} ({agg}, post-hoc)")
    audits, recorded = current_audits(store, study_id)
    return StudyInputs(
        study_id=study_id,
        name=info.name,
        dataset_id=info.dataset_id,
        phase=str(info.phase),
        level_names=plan.levels.names,
        preset=registered,
        overrides=overrides,
        preset_name=preset_name,
        provenance=provenance(store, study_id),
        seeds=list(info.preset.training.seeds),
        per_seed=table,
        baselines=base,
        arms=arms,
        effects=effects,
        omitted=omitted,
        headline=headline(effects) if HIER_METRIC in effects else [],
        redistribution=redist if isinstance(redist, Redistribution) else None,
        variance=var,
        audits=audits,
        audits_recorded=recorded,
        curves=training_curves(store, study_id),
        validation=validation_curves(store, study_id),
        tuning=tuning_frame(store, study_id),
        posthoc=posthoc,
        registered_aggregation=registered_aggregation(store, study_id),
        family=(member[0], member[1]) if member is not None else None,
        levels=plan.levels,
        hier=plan.hier,
    )


def family_inputs(store: Store, ref: str, *, metric: str = HIER_METRIC) -> FamilyInputs:
    """Everything the figures and the report of a family show: members (with their operating point),
    declared contrasts as far as they go, pooled effects once every member is evaluated."""
    family = get_family(store, ref)
    members = []
    for m in family.members:
        info = get_study(store, m.study_id)
        poincare = info.preset.geometry.poincare if any(info.preset.factorial.cell(a)[0].name == POINCARE for a in info.preset.cells) else None
        members.append(
            MemberInputs(
                member=m.member,
                study_id=m.study_id,
                phase=str(m.phase),
                overrides=m.overrides,
                curvature=None if poincare is None else poincare.c,
                radius=None if poincare is None else poincare.r,
                arms=tuple(info.preset.cells),
                per_seed=_evaluated(store, m.study_id) if m.phase == Phase.COMPLETE else None,
            )
        )
    pooled: Any
    try:
        pooled = family_effects(store, family.family_id, metric=metric)[1]
    except HierconsoleError as exc:
        pooled = str(exc).splitlines()[0]
    outer: OuterArmsView | str | None
    try:
        outer = outer_arms_so_far(store, family)
    except HierconsoleError as exc:
        outer = str(exc).splitlines()[0]
    first = family.members[0].study_id if family.members else None
    plan = study_levels(store, first) if first else LevelPlan.default(PAPER_LEVELS)
    levels = plan.levels
    return FamilyInputs(
        family_id=family.family_id,
        name=family.name,
        definition=family.definition,
        members=members,
        contrasts=contrasts_so_far(store, family, metric=metric),
        pooled=pooled,
        level_names=levels.names if first else PAPER_LEVELS.codes,  # a family without members as before
        provenance={"hierconsole": __version__, **({"members": {m.member: provenance(store, m.study_id) for m in family.members}})},
        metric=metric,
        outer=outer,
        levels=levels,
        hier=plan.hier,
    )


def is_family_ref(store: Store, ref: str | None) -> bool:
    """Whether `ref` names a family rather than a study (member studies are named `FAMILY.member`, so an
    exact study id or name wins over a family of the same name)."""
    from hierconsole.study.read.families import is_family

    if ref is None:
        return False
    exact = store.one("SELECT 1 FROM studies WHERE study_id = ? OR name = ?", [ref, ref])
    return exact is None and is_family(store, ref)


def inputs_for(store: Store, ref: str | None) -> StudyInputs | FamilyInputs:
    """The inputs of the family `ref` names, else of the study (None: the newest study)."""
    from hierconsole.study.db.records import resolve_study

    if is_family_ref(store, ref):
        assert ref is not None
        return family_inputs(store, ref)
    return study_inputs(store, resolve_study(store, ref))
