"""The sections of a study's and of a family's report, from their gathered inputs.

Each `*_sections` function returns plain `document.Section`s, so a larger report (the replication's) can
put them beside its own; :func:`study_document` and :func:`family_document` wrap them with a title.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from typing import Any

import polars as pl

from hierconsole.errors import HierconsoleError
from hierconsole.factorial import PAPER, Factorial, arms_in_order, is_baseline_contrast
from hierconsole.levels import Levels
from hierconsole.present import numbers
from hierconsole.present.levels import hier_words, levels_from
from hierconsole.present.levels import level_label as label_of
from hierconsole.present.report.document import Block, Code, Document, Facts, Figure, Section, Table, Text
from hierconsole.present.report.figures import draw
from hierconsole.present.report.figures.style import figure_bytes
from hierconsole.study.analysis.contrasts import StudyContrast, contrasts_frame
from hierconsole.study.analysis.effects import SimpleEffects
from hierconsole.study.analysis.frames import arms_frame, effects_frame, recall_frame, redistribution_frame
from hierconsole.study.analysis.headline import headline_frame
from hierconsole.study.analysis.outer_arms import outer_arms_frame, outer_gains_frame
from hierconsole.study.analysis.report_inputs import FamilyInputs, StudyInputs, level_label
from hierconsole.study.analysis.statistics import EQUIVALENCE_KEYS, EVIDENCE_SCHEMA, STATISTICS_LEGEND
from hierconsole.styles import EFFECT_DIGITS
from hierconsole.vocabulary import (
    BASELINE_LEGEND,
    HIER_METRIC,
    MAP,
    Phase,
)

WIDE_ARMS_UP_TO = 4
"""Up to this many levels the arms table is the paper's wide one (a mean and an SD column per level);
deeper, it is long: one row per arm and metric."""


def map_columns(levels: Levels) -> tuple[str, ...]:
    """Every level's mAP, leaf first, then the hier score."""
    return (*(f"{level}_{MAP}" for level in levels.codes), HIER_METRIC)


def _map_columns(inputs: StudyInputs) -> tuple[str, ...]:
    return map_columns(levels_from(inputs))

SECTION_IDS: dict[str, str] = {
    "protocol": "Protocol",
    "provenance": "Provenance",
    "arms": "Arms and baselines",
    "effects": "Effects with intervals",
    "redistribution": "Level-wise redistribution",
    "variance": "Seeds and query/gallery draws",
    "training": "Training",
    "audits": "Audits",
    "posthoc": "Post-hoc analyses",
    "commands": "Regenerate",
}
"""Every section of a study report, by anchor, in order (a family report has its own, below)."""

FAMILY_SECTION_IDS: dict[str, str] = {
    "members": "Members",
    "contrasts": "Declared contrasts",
    "pooled": "Effects pooled over members",
    "outer": "Arms over outer splits",
    "curvature": "Operating points",
    "provenance": "Provenance",
    "commands": "Regenerate",
}


def _figure(kind: str, inputs: StudyInputs | FamilyInputs, caption: str, **options: Any) -> Block:
    """The figure as a block, or a note saying why it cannot be drawn (a study without the data for it)."""
    try:
        fig = draw(kind, inputs, **options)
    except HierconsoleError as exc:
        return Text(f"No {kind} figure: {str(exc).splitlines()[0]}", note=True)
    return Figure(kind, figure_bytes(fig, "png"), caption)


def _value(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def _set_arguments(overrides: dict[str, Any]) -> list[str]:
    # A TOML literal per value (JSON's strings, numbers, booleans and arrays are TOML's too).
    return [a for key, value in overrides.items() for a in ("--set", f"{key}={json.dumps(value)}")]


def _effects_table(effects: SimpleEffects, names: list[str], metrics: list[str]) -> pl.DataFrame:
    frame = effects_frame({m: {n: e for n, e in effects[m].items() if n in names} for m in metrics if m in effects})
    keep = ["metric", "effect", "definition", "mean", "sd", *EVIDENCE_SCHEMA, "positive_seeds", "n_seeds"]
    return _without_tost(frame.select([c for c in keep if c in frame.columns and c != "ci95_boot_seed"]))


def _without_tost(frame: pl.DataFrame) -> pl.DataFrame:
    """The table without the TOST's columns when no SESOI was declared (all null): a report shows what was
    tested."""
    keys = [k for k in EQUIVALENCE_KEYS if k in frame.columns]
    if keys and frame.select(pl.col(keys[0]).is_null().all()).item():
        return frame.drop(keys)
    return frame


WHOLE_TREE_TITLE = "The whole tree's metrics (evaluation.metrics)"


def _whole_tree(inputs: StudyInputs, present: set[str]) -> list[str]:
    """The whole tree's metrics the study declares (`evaluation.metrics`) that its tables hold: a metric no
    query was defined for in some cell is left out of them."""
    return [m for m in inputs.preset["evaluation"].get("metrics") or () if m in present]


def _levels_fact(inputs: StudyInputs) -> str:
    levels = levels_from(inputs)
    if levels.is_paper:
        return ", ".join(level_label(level, inputs.level_names) for level in levels.codes)
    return f"{levels.k}: " + ", ".join(label_of(inputs, level) for level in levels.codes)


def _arms_long(arms: pl.DataFrame, metrics: tuple[str, ...]) -> pl.DataFrame:
    """The arm table long: arm, metric, n, mean, sd, one row per arm and mAP metric (levels leaf first)."""
    order = {m: i for i, m in enumerate(metrics)}
    ranks = {a: i for i, a in enumerate(arms_in_order(arms["arm"].to_list()))}
    rows = [r for r in arms.iter_rows(named=True) if r["metric"] in order and r["arm"] in ranks]
    rows.sort(key=lambda r: (ranks[r["arm"]], order[r["metric"]]))
    return pl.DataFrame(
        [{"arm": r["arm"], "metric": r["metric"], "n": r["n"], "mean": r["mean"], "sd": r["sd"]} for r in rows],
        schema={"arm": pl.String, "metric": pl.String, "n": pl.Int64, "mean": pl.Float64, "sd": pl.Float64},
    )


def _arms_table(inputs: StudyInputs, arms: pl.DataFrame) -> pl.DataFrame:
    levels = levels_from(inputs)
    if levels.is_paper:
        return arms_frame(arms)
    metrics = tuple(m for m in map_columns(levels) if m in set(arms["metric"].to_list()))
    return arms_frame(arms, list(metrics)) if levels.k <= WIDE_ARMS_UP_TO else _arms_long(arms, metrics)


def protocol_section(inputs: StudyInputs) -> Section:
    p = inputs.preset
    facts = [
        ("study", f"{inputs.name} ({inputs.study_id}), phase {inputs.phase}"),
        ("preset", inputs.preset_name or "(a preset file, not a shipped one)"),
        ("dataset", inputs.dataset_id),
        ("levels", _levels_fact(inputs)),
        ("cells", ", ".join(p["training"]["cells"])),
        ("training seeds", ", ".join(map(str, inputs.seeds))),
        ("epochs", str(p["training"]["epochs"])),
        ("split", str(p["split"]["protocol"])),
        ("aggregation (registered)", str(p["evaluation"]["aggregation"])),
        ("Q/G perturbations", ", ".join(map(str, p["evaluation"]["qg_seeds"]))),
        ("queries per perturbation", str(p["evaluation"]["n_query"])),
        ("Poincaré (c, r)", f"({p['geometry']['poincare']['c']}, {p['geometry']['poincare']['r']})"),
        ("temperatures", ", ".join(f"{k} {_value(v)}" for k, v in p["temperature"].items() if not isinstance(v, dict))),
        ("baselines", ", ".join(p["evaluation"]["baselines"]) or "none"),
    ]
    blocks: list[Block] = [Facts(facts)]
    if inputs.overrides:
        blocks.append(
            Table(
                pl.DataFrame({"option": list(inputs.overrides), "value": [_value(v) for v in inputs.overrides.values()]}),
                f"Overrides: where the registered preset differs from the shipped preset {inputs.preset_name}",
            )
        )
    elif inputs.preset_name:
        blocks.append(Text(f"No overrides: the study ran the shipped preset {inputs.preset_name} as it is."))
    blocks.append(Code(json.dumps(p, indent=2, sort_keys=True), "The registered preset, every option:", collapsed=True))
    return Section("protocol", SECTION_IDS["protocol"], blocks)


def provenance_section(provenance: dict[str, Any], section_id: str = "provenance") -> Section:
    ds = provenance.get("dataset") or {}
    facts = [("hierconsole", str(provenance.get("hierconsole")))]
    facts += [(f"dataset {k}", _value(ds[k])) for k in ("id", "kind", "samples", "dim", "sha256", "taxonomy_sha256") if k in ds]
    extraction = ds.get("extraction")
    if extraction:
        weights = extraction.get("weights") or {}
        facts.append(("weights sha256", str(weights.get("sha256"))))
        facts += [(f"extraction {k}", _value(v)) for k, v in extraction.items() if k != "weights"]
    else:
        facts.append(("weights", "not recorded (features not made by `hierconsole extract`); the features' sha256 is among the sources"))
    for k in ("preset_sha256", "lock_sha256", "created_at", "locked_at", "test_first_read_at", "training_seeds", "qg_seeds", "threads_per_worker"):
        if k in provenance:
            facts.append((k.replace("_", " "), _value(provenance[k])))
    blocks: list[Block] = [Facts(facts)]
    if ds.get("sources"):
        blocks.append(Table(pl.DataFrame({"input": list(ds["sources"]), "sha256": list(ds["sources"].values())}), "Dataset inputs"))
    if provenance.get("splits"):
        splits = provenance["splits"]
        blocks.append(Table(pl.DataFrame({"split": list(splits), "sha256": list(splits.values())}), "Splits (hashes of their index files)"))
    workers = provenance.get("workers") or []
    if workers:
        frame = pl.DataFrame([{k: (None if v is None else str(v)) for k, v in w.items()} for w in workers])
        blocks.append(Table(frame, "Workers: device, threads, determinism settings and versions, with the number of starts"))
    return Section(section_id, SECTION_IDS["provenance"], blocks)


def arms_section(inputs: StudyInputs) -> Section:
    if inputs.arms is None:
        return Section("arms", SECTION_IDS["arms"], [Text(f"No official-test metrics yet (phase {inputs.phase}).", note=True)])
    blocks: list[Block] = [
        Table(_arms_table(inputs, inputs.arms), "mAP per arm: mean ± sample SD over training seeds (baselines after the cells)"),
        Text(Factorial.spanned(inputs.arms["arm"].to_list()).legend + ". " + (BASELINE_LEGEND + "." if inputs.baselines is not None else ""), note=True),
    ]
    tree = _whole_tree(inputs, set(inputs.arms["metric"].to_list()))
    if tree:
        blocks.append(Table(arms_frame(inputs.arms, tree), f"{WHOLE_TREE_TITLE} per arm: mean ± sample SD over training seeds"))
    with contextlib.suppress(HierconsoleError):  # a study scored without Recall@K has no such table
        blocks.append(Table(recall_frame(inputs.arms), "Recall@K per arm and level: mean ± SD over seeds"))
    blocks.append(_figure("recall", inputs, "Recall@K against K per level; bands: 95 % t interval over seeds."))
    if Factorial.spanned(inputs.arms["arm"].to_list()) != PAPER:  # the paper's 2 × 2 reads from its table
        blocks.append(_figure("factorial", inputs, "The factorial: hier mAP per cell, mean ± SD over seeds; geometries down, objectives across."))
    return Section("arms", SECTION_IDS["arms"], blocks)


def effects_section(inputs: StudyInputs) -> Section:
    if not inputs.effects:
        return Section("effects", SECTION_IDS["effects"], [Text(f"No effects yet (phase {inputs.phase}).", note=True)])
    metrics = [m for m in _map_columns(inputs) if m in inputs.effects] or list(inputs.effects)
    factorial = list(dict.fromkeys(n for m in metrics for n in inputs.effects[m] if not is_baseline_contrast(n)))
    blocks: list[Block] = [
        Table(_effects_table(inputs.effects, factorial, metrics), "Simple effects and the interaction, paired within seed", EFFECT_DIGITS),
        Text(STATISTICS_LEGEND + ".", note=True),
        _figure("effects", inputs, "Effects of hier mAP: open circles per seed, diamond the mean, upper bar the 95 % t interval, lower bar the 95 % bootstrap."),
    ]
    tree = _whole_tree(inputs, set(inputs.effects))
    if tree:
        blocks.append(Table(_effects_table(inputs.effects, factorial, tree), f"{WHOLE_TREE_TITLE}: simple effects and the interaction, paired within seed", EFFECT_DIGITS))
    if inputs.omitted:
        blocks.append(Text(inputs.omitted, note=True))
    baseline_names = sorted({n for m in metrics for n in inputs.effects[m] if is_baseline_contrast(n)})
    if baseline_names:
        blocks.append(
            Table(
                _effects_table(inputs.effects, baseline_names, [HIER_METRIC] if HIER_METRIC in metrics else metrics[:1]),
                "Each cell minus each baseline (hier mAP)",
                EFFECT_DIGITS,
            )
        )
    if inputs.headline:
        blocks.append(
            Table(
                headline_frame(inputs.headline).drop("ci95_boot_seed"),
                "Headline: |loss effect| − |geometry effect| of hier mAP, paired by seed (> 0: the objective-family contrast is the larger)",
                EFFECT_DIGITS,
            )
        )
    return Section("effects", SECTION_IDS["effects"], blocks)


def redistribution_section(inputs: StudyInputs) -> Section:
    if inputs.redistribution is None:
        return Section("redistribution", SECTION_IDS["redistribution"], [Text("Not computable for this study (it needs every level's mAP and the arms of H_S − E_S or H_R − E_R).", note=True)])
    frame = redistribution_frame(inputs.redistribution).drop("ci95_boot_seed")
    return Section(
        "redistribution",
        SECTION_IDS["redistribution"],
        [
            Table(frame, f"{inputs.redistribution.difference} per level: finer levels down, highest level up?", EFFECT_DIGITS),
            _figure("redistribution", inputs, f"Left: mAP per level per arm. Right: {inputs.redistribution.difference} per level with per-seed points and the 95 % t interval."),
        ],
    )


def variance_section(inputs: StudyInputs) -> Section:
    if inputs.variance is None or inputs.variance.is_empty():
        return Section("variance", SECTION_IDS["variance"], [Text("No official-test metrics yet.", note=True)])
    frame = inputs.variance.filter(pl.col("metric").is_in(list(_map_columns(inputs))))
    return Section(
        "variance",
        SECTION_IDS["variance"],
        [
            Table(frame if not frame.is_empty() else inputs.variance, "Variance components of the arm metrics", 8),
            Text(
                "between_seed_var: sample variance of the seed means (what the SD over seeds shows); within_seed_var: "
                "sample variance over a seed's query/gallery perturbations, averaged over seeds; seed_var: the seeds' "
                "own share, between − within / P, floored at 0. Baselines without a training seed have no between-seed term.",
                note=True,
            ),
        ],
    )


def training_section(inputs: StudyInputs) -> Section:
    blocks: list[Block] = [_figure("training", inputs, "Training loss per epoch (log scale) and validation hier mAP, per cell; line style: seed.")]
    if not inputs.tuning.is_empty():
        blocks.append(Table(inputs.tuning.drop("study_id") if "study_id" in inputs.tuning.columns else inputs.tuning, "Temperature selection on the tuning split (S6)"))
        blocks.append(_figure("temperature", inputs, "Validation score against τ per geometry; the star marks the chosen one."))
    return Section("training", SECTION_IDS["training"], blocks)


def audits_section(inputs: StudyInputs) -> Section:
    frame = pl.DataFrame(
        {
            "check": [c.name for c in inputs.audits],
            "result": ["pass" if c.ok else "pending" if c.ok is None else "FAIL" for c in inputs.audits],
            "evidence": [c.evidence for c in inputs.audits],
        }
    )
    note = "Recorded when the study completed." if inputs.audits_recorded else "Not recorded yet: each check as it evaluates now."
    failed = sum(c.ok is False for c in inputs.audits)
    blocks: list[Block] = [Table(frame, f"{len(inputs.audits)} checks, {failed} failed. {note}")]
    return Section("audits", SECTION_IDS["audits"], blocks)


def posthoc_section(inputs: StudyInputs) -> Section:
    if not inputs.posthoc:
        return Section(
            "posthoc",
            SECTION_IDS["posthoc"],
            [Text(f"None: every number above is the registered endpoint ({inputs.registered_aggregation} aggregation).")],
            posthoc=True,
        )
    blocks: list[Block] = []
    for agg, effects in inputs.posthoc.items():
        metrics = [m for m in _map_columns(inputs) if m in effects]
        blocks.append(
            Table(
                _effects_table(effects, list(dict.fromkeys(n for m in metrics for n in effects[m] if not is_baseline_contrast(n))), metrics),
                f"Effects re-scored under {agg} aggregation (post-hoc; the registered one is {inputs.registered_aggregation})",
                EFFECT_DIGITS,
            )
        )
    return Section("posthoc", SECTION_IDS["posthoc"], blocks, posthoc=True)


def study_commands(inputs: StudyInputs) -> list[str]:
    """The commands that regenerate the study and this report (run against the same home)."""
    if inputs.family is not None:
        family, member = inputs.family
        run = f"hierconsole run {shlex.quote(family)}    # the family this study is member {member} of"
    elif inputs.preset_name:
        # The dataset always: a study's dataset is its own row, not a preset option, so the preset's
        # `data.dataset` (the demo's synthetic data) is not where an imported dataset's study trained.
        run = shlex.join(
            ["hierconsole", "run", inputs.preset_name, "--dataset", inputs.dataset_id, *_set_arguments(inputs.overrides)]
        )
    else:
        run = (
            f"hierconsole run PRESET.toml --dataset {shlex.quote(inputs.dataset_id)}    "
            f"# the preset file the study was made from (its options are in Protocol)"
        )
    return [
        run,
        f"hierconsole audit {inputs.study_id} --recheck",
        f"hierconsole effects {inputs.study_id} --json",
        f"hierconsole report {inputs.study_id} -o report.html",
        *(f"hierconsole plot {kind} {inputs.study_id} -o {kind}.pdf" for kind in ("effects", "redistribution", "training", "recall")),
    ]


def study_sections(inputs: StudyInputs) -> list[Section]:
    """Every section of a study's report, in :data:`SECTION_IDS` order."""
    return [
        protocol_section(inputs),
        provenance_section(inputs.provenance),
        arms_section(inputs),
        effects_section(inputs),
        redistribution_section(inputs),
        variance_section(inputs),
        training_section(inputs),
        audits_section(inputs),
        posthoc_section(inputs),
        Section(
            "commands",
            SECTION_IDS["commands"],
            [
                Code("\n".join(study_commands(inputs)), "With the same --home (or HIERCONSOLE_HOME), and the dataset imported with the sha256 above:"),
            ],
        ),
    ]


def study_document(inputs: StudyInputs) -> Document:
    return Document(
        f"{inputs.name}: study report",
        f"Study {inputs.study_id} on {inputs.dataset_id}, {len(inputs.seeds)} training seeds, phase {inputs.phase}",
        study_sections(inputs),
    )


# ------------------------------------------------------------------------------------------- families


def _contrast_rows(contrasts: list[tuple[str, StudyContrast | str]]) -> tuple[pl.DataFrame | None, list[str]]:
    done = [c for _, c in contrasts if isinstance(c, StudyContrast)]
    waiting = [f"{name}: {c}" for name, c in contrasts if isinstance(c, str)]
    if not done:
        return None, waiting
    frame = contrasts_frame(done)
    seeds = [c for c in frame.columns if c.startswith("seed_")]
    return frame.drop([*seeds, "a", "b", "ci95_boot_seed"]), waiting


def family_sections(inputs: FamilyInputs) -> list[Section]:
    """Every section of a family's report, in :data:`FAMILY_SECTION_IDS` order."""
    members = pl.DataFrame(
        {
            "member": [m.member for m in inputs.members],
            "study": [m.study_id for m in inputs.members],
            "phase": [m.phase for m in inputs.members],
            "cells": [", ".join(m.arms) for m in inputs.members],
            "c": [numbers.setting(m.curvature) for m in inputs.members],
            "r": [numbers.setting(m.radius) for m in inputs.members],
            "overrides": [", ".join(f"{k}={_value(v)}" for k, v in m.overrides.items()) for m in inputs.members],
        }
    )
    sections = [Section("members", FAMILY_SECTION_IDS["members"], [Table(members, f"Base preset {inputs.definition.get('base', '?')}; members share its training seeds")])]
    frame, waiting = _contrast_rows(inputs.contrasts)
    blocks: list[Block] = []
    if frame is not None:
        blocks += [
            Table(frame, f"A − B paired by training seed, per arm pair and level (hier: mean of {hier_words(inputs)} mAP)", EFFECT_DIGITS),
            Text(STATISTICS_LEGEND + ".", note=True),
            _figure("contrasts", inputs, "Each declared contrast: per-seed points, mean, 95 % t (upper) and bootstrap (lower) intervals."),
        ]
    blocks += [Text(f"Not yet: {w}", note=True) for w in waiting]
    if not blocks:
        blocks.append(Text("The family declares no contrasts.", note=True))
    sections.append(Section("contrasts", FAMILY_SECTION_IDS["contrasts"], blocks))
    if isinstance(inputs.pooled, str):
        pooled_blocks: list[Block] = [Text(inputs.pooled, note=True)]
    else:
        pooled = pl.DataFrame(
            [
                {"effect": name, "definition": e.definition, "mean": e.mean, "sd": e.sd, **e.evidence.columns(), "positive": e.positive, "n": e.n}
                for name, e in inputs.pooled.items()
            ],
            schema={"effect": pl.String, "definition": pl.String, "mean": pl.Float64, "sd": pl.Float64, **EVIDENCE_SCHEMA, "positive": pl.Int64, "n": pl.Int64},
        ).drop("ci95_boot_seed")
        pooled = _without_tost(pooled)
        pooled_blocks = [
            Table(pooled, f"Each member's effect of {inputs.metric} (mean over its seeds), summarised with the member as the unit", EFFECT_DIGITS),
            _figure("effects", inputs, "Pooled effects: one point per member."),
        ]
    sections.append(Section("pooled", FAMILY_SECTION_IDS["pooled"], pooled_blocks))
    sections.append(Section("outer", FAMILY_SECTION_IDS["outer"], _outer_blocks(inputs)))
    sections.append(Section("curvature", FAMILY_SECTION_IDS["curvature"], [_figure("curvature", inputs, "Each member's Poincaré operating point (c, r) against its hier mAP; dashed: a Euclidean member.")]))
    member_prov = inputs.provenance.get("members", {})
    prov_blocks: list[Block] = [Facts([("hierconsole", str(inputs.provenance.get("hierconsole")))])]
    for member, prov in member_prov.items():
        ds = prov.get("dataset") or {}
        prov_blocks.append(
            Facts(
                [
                    (f"{member} study", str(next(m.study_id for m in inputs.members if m.member == member))),
                    (f"{member} dataset sha256", str(ds.get("sha256"))),
                    (f"{member} preset sha256", str(prov.get("preset_sha256"))),
                    (f"{member} lock sha256", str(prov.get("lock_sha256"))),
                    (f"{member} seeds", _value(prov.get("training_seeds"))),
                ]
            )
        )
    sections.append(Section("provenance", FAMILY_SECTION_IDS["provenance"], prov_blocks))
    commands = [
        family_run_command(inputs),
        f"hierconsole contrast {shlex.quote(inputs.name)} --json",
        f"hierconsole report {shlex.quote(inputs.name)} -o report.html",
        *(f"hierconsole plot {kind} {shlex.quote(inputs.name)} -o {kind}.pdf" for kind in ("contrasts", "effects", "curvature")),
    ]
    sections.append(Section("commands", FAMILY_SECTION_IDS["commands"], [Code("\n".join(commands), "With the same --home:")]))
    return sections


def family_run_command(inputs: FamilyInputs) -> str:
    """`hierconsole run` as the family ran: its file, its members' dataset and the command line's
    overrides (without them a family run with `--set expected=none` is refused as printed)."""
    file = inputs.definition.get("file")
    if file is None:  # recorded before the file was, or built in memory (a sweep)
        return f"hierconsole run {shlex.quote(inputs.name)}    # the family file (presets/families/{inputs.name}.toml or yours)"
    datasets = {(prov.get("dataset") or {}).get("id") for prov in inputs.provenance.get("members", {}).values()}
    # One --dataset for every member; members on datasets of their own (data.dataset) keep their own.
    dataset = ["--dataset", str(next(iter(datasets)))] if len(datasets) == 1 and None not in datasets else []
    return shlex.join(["hierconsole", "run", str(file), *dataset, *_set_arguments(inputs.definition.get("command_line", {}))])


def _outer_blocks(inputs: FamilyInputs) -> list[Block]:
    """An outer-split family's arms (mean ± SD over splits) and paired gains per split (paper Sec. 5.5)."""
    if inputs.outer is None:
        return [Text("The family declares no outer-split arms ([splits] and [[arms]]).", note=True)]
    if isinstance(inputs.outer, str):
        return [Text(f"Not yet: {inputs.outer}", note=True)]
    arms = outer_arms_frame(inputs.outer)
    blocks: list[Block] = [
        Table(arms, "Each arm's value on every outer split (its mean over the split's training seeds), then mean ± SD with the split as the unit"),
    ]
    if inputs.outer.gains:
        gains = outer_gains_frame(inputs.outer).drop("ci95_boot_seed")
        blocks.append(Table(gains, "Each gain A − B paired by outer split, mean ± SD over splits and the splits where it is positive", EFFECT_DIGITS))
    if inputs.outer.omitted:
        blocks.append(Text(f"Left out (a level without valid queries on some split): {', '.join(inputs.outer.omitted)}.", note=True))
    return blocks


def family_document(inputs: FamilyInputs) -> Document:
    done = sum(m.phase == Phase.COMPLETE for m in inputs.members)
    return Document(
        f"{inputs.name}: family report",
        f"Family {inputs.family_id}, {len(inputs.members)} members ({done} complete)",
        family_sections(inputs),
    )
