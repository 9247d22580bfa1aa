"""What each stage of a replication does: the project's own verbs (`verbs`), called in this process, and
the extraction, the one stage run as a child (`hierconsole extract`: torch and the backbone stay out of
this process, and its decoding workers die with it).

A replication is made of ordinary datasets, studies and families that every other command reads. Each
stage writes its lines to its log in the replication folder. Every stage is idempotent: a file that exists
was written whole (through a temporary file), a study or family of the stage's name that exists is
resumed, or kept when complete, never started twice.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from hierconsole.errors import HierconsoleError
from hierconsole.orphans import die_with_parent
from hierconsole.study.commands import replicate_verbs as verbs
from hierconsole.study.replication.hashes import file_sha256, text_sha256
from hierconsole.study.replication.runner import StageAction
from hierconsole.study.replication.stages import (
    CUB,
    REPORT_STAGE,
    RESCORED,
    STAGE_RUNS,
    TABLES_STAGE,
    StudyRun,
    assignment_list,
    plan_key,
    run_overrides,
)
from hierconsole.vocabulary import Aggregation

RANDOM = "none"
"""--weights none: random weights (`extraction.weights.RANDOM`, spelled here: this room never imports the
extractor)."""


@dataclass
class StageLog:
    """The running stage's log file and its last line (what the live progress line shows)."""

    path: Path
    last: str = ""

    def say(self, line: str) -> None:
        with self.path.open("a", encoding="utf-8") as sink:
            sink.write(line + "\n")
        self.last = line


@dataclass
class Replication:
    """Everything a stage needs: the inputs as given and where the replication keeps its files."""

    options: Any
    """The replicate command's options (cub, nabirds, weights, seed, model, checklist, cub_taxonomy,
    aliases, scale, executor, ray_address)."""
    home: Path
    replication_id: str
    folder: Path
    """HOME/replications/<id>: features, taxonomy, logs, and the tables unless --out says otherwise."""
    external: Mapping[str, str]
    """The replication's input hashes (`plan:<stage>` among them)."""
    logs: dict[str, StageLog] = field(default_factory=dict)
    on_warning: Callable[[str], None] | None = None
    children: set[subprocess.Popen] = field(default_factory=set)
    stop_event: threading.Event = field(default_factory=threading.Event)
    worked: set[str] = field(default_factory=set)
    """Stages that did work in this run (the others found their outputs made and kept them)."""
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def features(self, dataset: str) -> Path:
        return self.folder / "features" / f"{dataset}.npz"

    def taxonomy(self) -> Path:
        return self.folder / "taxonomy" / "cub.csv"

    def root(self, dataset: str) -> Path:
        return Path(self.options.cub if dataset == CUB else self.options.nabirds)

    def log(self, stage: str) -> StageLog:
        log = self.logs.setdefault(stage, StageLog(self.folder / "logs" / f"{stage}.log"))
        log.path.parent.mkdir(parents=True, exist_ok=True)
        return log

    def name(self, stage: str, run: StudyRun, dataset_id: str) -> str:
        """The store name of a stage's study or family: unique to this replication, its dataset and what
        the stage runs, so a changed input or plan (then `--redo`) starts new studies, and a re-run with
        the same ones finds and resumes (or keeps) its own."""
        tag = text_sha256(f"{dataset_id}:{self.external[plan_key(stage)]}")[:6]
        return f"{self.replication_id}.{run.dataset}-{run.name}-{tag}"

    def verb(self, stage: str, command: str, call: Callable[[], Any]) -> Any:
        """Call a verb in this process as the stage's work, `$ hierconsole COMMAND` in its log (what a user
        would type); its refusal is one line naming the stage and the log."""
        log = self.log(stage)
        log.say(f"$ hierconsole {command}")
        self.worked.add(stage)
        try:
            return call()
        except Exception as exc:  # as a child command's failure was: one line, the rest in the log
            log.say("".join(traceback.format_exception(exc)) if not isinstance(exc, HierconsoleError) else f"error: {exc}")
            raise HierconsoleError(
                f"replicate: stage {stage} failed: {(str(exc).splitlines() or [type(exc).__name__])[0]} (in `hierconsole {command[:60]} ...`, "
                f"logged in {log.path}); fix the cause and run replicate again (finished stages are kept)"
            ) from None

    def extract(self, stage: str, argv: Sequence[str]) -> None:
        """`hierconsole --home HOME extract ...` as a child, its output into the stage's log."""
        log = self.log(stage)
        log.say(f"$ hierconsole {shlex.join(argv)}")
        self.worked.add(stage)
        with log.path.open("a", encoding="utf-8") as sink:
            child = subprocess.Popen(
                [sys.executable, "-m", "hierconsole", "--home", str(self.home), *argv],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                errors="replace", preexec_fn=die_with_parent,  # noqa: PLW1509 - prctl only, no locks taken
            )  # fmt: skip
            assert child.stdout is not None
            with self._guard:
                self.children.add(child)
                if self.stop_event.is_set():  # stop() ran while this command was being started
                    child.terminate()
            for line in child.stdout:
                sink.write(line)
                sink.flush()
                log.last = line.strip() or log.last
            code = child.wait()
            with self._guard:
                self.children.discard(child)
        if code:
            raise HierconsoleError(
                f"replicate: stage {stage} failed: `hierconsole {' '.join(argv[:3])} ...` exited {code}; "
                f"its output is in {log.path}; fix the cause and run replicate again (finished stages are kept)"
            )

    def timed(self, stage: str) -> bool:
        """Whether the stage's time in this run measured work (not only finding its outputs made)."""
        return stage in self.worked or stage in (TABLES_STAGE, REPORT_STAGE)

    def stop(self) -> None:
        """Another stage failed (or the replication is interrupted): the extraction is terminated (it keeps
        its finished shards) and a running study's jobs are cancelled (resumable)."""
        with self._guard:
            self.stop_event.set()
            for child in self.children:
                child.terminate()

    def actions(self, stages: Sequence[str], tables: StageAction, report: StageAction) -> dict[str, StageAction]:
        made: dict[str, StageAction] = {TABLES_STAGE: tables, REPORT_STAGE: report}
        for stage in stages:
            kind, _, dataset = stage.partition("-")
            if kind == "extract":
                made[stage] = self._extract(stage, dataset)
            elif kind == "taxonomy":
                made[stage] = self._taxonomy(stage)
            elif kind == "import":
                made[stage] = self._import(stage, dataset)
            elif stage in STAGE_RUNS:
                made[stage] = self._studies(stage, STAGE_RUNS[stage])
            elif stage in RESCORED:
                made[stage] = self._rescore(stage, *RESCORED[stage])
        return made

    def _extract(self, stage: str, dataset: str) -> StageAction:
        def act(_: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
            out = self.features(dataset)
            if not out.is_file():  # a finished extraction renamed its file into place whole
                out.parent.mkdir(parents=True, exist_ok=True)
                o = self.options
                argv = ["extract", dataset, str(self.root(dataset)), "-o", str(out), "--weights", o.weights]
                argv += ["--model", o.model, *(["--seed", str(o.seed)] if o.weights == RANDOM else [])]
                self.extract(stage, argv)
            return {"features": file_sha256(out)}

        return act

    def _taxonomy(self, stage: str) -> StageAction:
        def act(_: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
            out = self.taxonomy()
            out.parent.mkdir(parents=True, exist_ok=True)
            o = self.options
            if o.cub_taxonomy is not None:
                tmp = out.with_name(out.name + ".tmp")
                shutil.copyfile(o.cub_taxonomy, tmp)  # the home keeps its own copy
                tmp.replace(out)
            else:
                classes = self.root(CUB) / "classes.txt"
                command = f"taxonomy build-cub {classes} {o.checklist} -o {out} --overwrite"
                self.verb(stage, command, lambda: verbs.build_taxonomy(classes, o.checklist, o.aliases, out))
            return {"taxonomy": file_sha256(out)}

        return act

    def _import(self, stage: str, dataset: str) -> StageAction:
        def act(upstream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
            inputs = "".join(v for outputs in upstream.values() for v in sorted(outputs.values()))
            # A new id for new inputs: a changed extraction never replaces a dataset that studies use.
            dataset_id = f"{dataset}-{text_sha256(inputs)[:10]}"
            if dataset_id not in verbs.known_datasets(self.home):
                root, features = self.root(dataset), self.features(dataset)
                taxonomy = self.taxonomy() if dataset == CUB else None
                command = f"import {dataset} {root} {features} {taxonomy or ''} --name {dataset_id}"
                self.verb(stage, command, lambda: verbs.import_dataset(self.home, dataset, root, features, taxonomy, dataset_id))
            return {"dataset": dataset_id}

        return act

    def _studies(self, stage: str, runs: Sequence[StudyRun]) -> StageAction:
        def act(upstream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
            (imported,) = upstream.values()
            return {run.name: self._study_run(stage, run, imported["dataset"]) for run in runs}

        return act

    def _study_run(self, stage: str, run: StudyRun, dataset_id: str) -> str:
        """Run (or resume, or keep) one study or family; returns its id once every study is complete."""
        name = self.name(stage, run, dataset_id)
        where = {"executor": self.options.executor, "address": self.options.ray_address}
        say = self.log(stage).say
        found = verbs.find(self.home, name, run.family)
        if found is None:
            values = run_overrides(run, self.options.scale)
            sets = "".join(f" --set {shlex.quote(a)}" for a in assignment_list(values))
            command = f"run {run.preset} --dataset {dataset_id} --name {name}{sets}"
            self.verb(stage, command, lambda: verbs.run_study(
                self.home, run.preset, values, dataset=dataset_id, name=name, family=run.family,
                stop=self.stop_event, say=say, **where,
            ))  # fmt: skip
        else:
            for study_id in found[1]:  # an interrupted run: its jobs go on from their checkpoints
                resume = partial(verbs.resume, self.home, study_id, stop=self.stop_event, say=say, **where)
                self.verb(stage, f"resume {study_id}", resume)
        found = verbs.find(self.home, name, run.family)
        if found is None or found[1]:
            raise HierconsoleError(f"replicate: stage {stage}: {name} did not complete; see {self.log(stage).path}")
        ran = stage in self.worked  # as `run` and `resume` exit 1 on: said when they ran now
        if ran and self.on_warning is not None and not verbs.audits_pass(self.home, found[0], run.family):
            self.on_warning(
                f"{stage}: {name} completed with a failed audit; `hierconsole --home {self.home} audit` says "
                "which (table S12 lists every audit)"
            )
        return found[0]

    def _rescore(self, stage: str, factorial_stage: str, aggregation: Aggregation) -> StageAction:
        def act(upstream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
            (study_id,) = upstream[factorial_stage].values()
            if not verbs.rescored(self.home, study_id, aggregation):
                call = lambda: verbs.rescore(self.home, study_id, aggregation, stop=self.stop_event, say=self.log(stage).say)  # noqa: E731
                if not self.verb(stage, f"rescore {study_id} --aggregate {aggregation}", call):
                    raise HierconsoleError(
                        f"replicate: stage {stage} failed: the re-score of {study_id} does not reconcile; "
                        f"see {self.log(stage).path}"
                    )
            return {"rescored": f"{study_id}:{aggregation}"}

        return act

