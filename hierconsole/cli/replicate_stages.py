"""What each stage of `hierconsole replicate` does: the project's own commands, run as child processes.

A stage runs exactly the commands a user would type (`extract`, `taxonomy build-cub`, `import`, `run`,
`resume`, `rescore`), so a replication is made of ordinary datasets, studies and families that every other
command reads. Each child writes to the stage's log in the replication folder; the store is opened by the
child alone (one writer at a time). Every stage is idempotent: a file that exists was written whole (the
commands write through a temporary file), a study or family of the stage's name that exists is resumed,
or kept when complete, never started twice.

Children die with the replicate process (PR_SET_PDEATHSIG), so a killed replication leaves no command
running; the study workers a `run` started are the store's usual orphans, which `resume` adopts.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hierconsole.errors import HierconsoleError
from hierconsole.extraction.weights import RANDOM
from hierconsole.orphans import die_with_parent
from hierconsole.study import read
from hierconsole.study.db.storage import Store
from hierconsole.study.read.families import list_families
from hierconsole.study.run.input_hashes import file_sha256, text_sha256
from hierconsole.study.run.paper_stages import (
    CUB,
    REPORT_STAGE,
    RESCORED,
    STAGE_RUNS,
    TABLES_STAGE,
    StudyRun,
    assignment,
    plan_key,
    run_overrides,
)
from hierconsole.study.run.replication import StageAction
from hierconsole.vocabulary import Phase

_STUDY_OK = (0, 1)
"""Exit statuses of `run` and `resume` after which the stage looks at the studies themselves: 1 is also a
completed study with a failed audit, which the replication reports and goes on from."""


@dataclass
class StageLog:
    """The running stage's log file and its last line (what the live progress line shows)."""

    path: Path
    last: str = ""


@dataclass
class Replication:
    """Everything a stage needs: the inputs as given and where the replication keeps its files."""

    args: argparse.Namespace
    home: Path
    replication_id: str
    folder: Path
    """HOME/replications/<id>: features, taxonomy, logs, and the tables unless --out says otherwise."""
    external: Mapping[str, str]
    """The replication's input hashes (`plan:<stage>` among them)."""
    logs: dict[str, StageLog] = field(default_factory=dict)
    on_warning: Callable[[str], None] | None = None
    children: set[subprocess.Popen] = field(default_factory=set)
    """The stages' commands running now (stages run in threads of their own, some at once)."""
    stopping: bool = False
    commanded: set[str] = field(default_factory=set)
    """Stages that started a command in this run (the others found their outputs made and kept them)."""
    _guard: threading.Lock = field(default_factory=threading.Lock)

    # --- files ---------------------------------------------------------------------------------------

    def features(self, dataset: str) -> Path:
        return self.folder / "features" / f"{dataset}.npz"

    def taxonomy(self) -> Path:
        return self.folder / "taxonomy" / "cub.csv"

    def root(self, dataset: str) -> Path:
        return Path(self.args.cub if dataset == CUB else self.args.nabirds)

    def name(self, stage: str, run: StudyRun, dataset_id: str) -> str:
        """The store name of a stage's study or family: unique to this replication, its dataset and what
        the stage runs, so a changed input or plan (then `--redo`) starts new studies, and a re-run with
        the same ones finds and resumes (or keeps) its own."""
        tag = text_sha256(f"{dataset_id}:{self.external[plan_key(stage)]}")[:6]
        return f"{self.replication_id}.{run.dataset}-{run.name}-{tag}"

    # --- child commands ------------------------------------------------------------------------------

    def command(self, stage: str, argv: Sequence[str], ok: Sequence[int] = (0,)) -> int:
        """Run `hierconsole --home HOME ARGV` as a child, its output into the stage's log; an exit status
        not in ``ok`` is one line naming the stage, the command and the log. Returns the status."""
        log = self.logs.setdefault(stage, StageLog(self.folder / "logs" / f"{stage}.log"))
        log.path.parent.mkdir(parents=True, exist_ok=True)
        full = [sys.executable, "-m", "hierconsole", "--home", str(self.home), *argv]
        with log.path.open("a", encoding="utf-8") as sink:
            sink.write(f"$ hierconsole {shlex.join(argv)}\n")
            sink.flush()
            child = subprocess.Popen(
                full,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",
                preexec_fn=die_with_parent,  # noqa: PLW1509 - prctl only, no locks taken
            )
            assert child.stdout is not None
            with self._guard:
                self.children.add(child)
                self.commanded.add(stage)
                if self.stopping:  # stop() ran while this command was being started
                    child.terminate()
            reader = threading.Thread(target=self._follow, args=(child.stdout, sink, log), daemon=True)
            reader.start()
            code = child.wait()
            with self._guard:
                self.children.discard(child)
            reader.join()
        if code not in ok:
            raise HierconsoleError(
                f"replicate: stage {stage} failed: `hierconsole {' '.join(argv[:3])} ...` exited {code}; "
                f"its output is in {log.path}; fix the cause and run replicate again (finished stages are kept)"
            )
        return code

    def timed(self, stage: str) -> bool:
        """Whether the stage's time in this run measured work: it ran a command, or it is the tables or the
        report (work done in this process)."""
        return stage in self.commanded or stage in (TABLES_STAGE, REPORT_STAGE)

    def stop(self) -> None:
        """Ask every running command to stop (SIGTERM: a `run` cancels its jobs, resumable; an extraction
        keeps its finished shards): another stage failed, and the replication ends once they have."""
        with self._guard:
            self.stopping = True
            for child in self.children:
                child.terminate()

    @staticmethod
    def _follow(stream, sink, log: StageLog) -> None:  # noqa: ANN001
        """Copy the child's lines into the log; the live view shows `log.last` at its next refresh."""
        for line in stream:
            sink.write(line)
            sink.flush()
            if text := line.strip():
                log.last = text

    # --- the stages ----------------------------------------------------------------------------------

    def actions(self, stages: Sequence[str], tables: StageAction, report: StageAction) -> dict[str, StageAction]:
        made: dict[str, StageAction] = {"tables": tables, "report": report}
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
                argv = ["extract", dataset, str(self.root(dataset)), "-o", str(out), "--weights", self.args.weights]
                argv += ["--model", self.args.model]
                if self.args.weights == RANDOM:
                    argv += ["--seed", str(self.args.seed)]
                self.command(stage, argv)
            return {"features": file_sha256(out)}

        return act

    def _taxonomy(self, stage: str) -> StageAction:
        def act(_: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
            out = self.taxonomy()
            out.parent.mkdir(parents=True, exist_ok=True)
            if self.args.cub_taxonomy is not None:
                tmp = out.with_name(out.name + ".tmp")
                shutil.copyfile(self.args.cub_taxonomy, tmp)  # the home keeps its own copy
                tmp.replace(out)
            else:
                argv = ["taxonomy", "build-cub", str(self.root(CUB) / "classes.txt"), str(self.args.checklist)]
                argv += ["-o", str(out), "--overwrite"]
                if self.args.aliases is not None:
                    argv += ["--aliases", str(self.args.aliases)]
                self.command(stage, argv)
            return {"taxonomy": file_sha256(out)}

        return act

    def _import(self, stage: str, dataset: str) -> StageAction:
        def act(upstream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
            inputs = "".join(v for outputs in upstream.values() for v in sorted(outputs.values()))
            # A new id for new inputs: a changed extraction never replaces a dataset that studies use.
            dataset_id = f"{dataset}-{text_sha256(inputs)[:10]}"
            with Store(self.home, read_only=True) as store:
                known = {d.dataset_id for d in read.list_datasets(store)}
            if dataset_id not in known:
                argv = ["import", dataset, str(self.root(dataset)), str(self.features(dataset))]
                if dataset == CUB:
                    argv.append(str(self.taxonomy()))
                self.command(stage, [*argv, "--name", dataset_id])
            return {"dataset": dataset_id}

        return act

    def _studies(self, stage: str, runs: Sequence[StudyRun]) -> StageAction:
        def act(upstream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
            (imported,) = upstream.values()
            outputs: dict[str, str] = {}
            for run in runs:
                outputs[run.name] = self._study_run(stage, run, imported["dataset"])
            return outputs

        return act

    def _study_run(self, stage: str, run: StudyRun, dataset_id: str) -> str:
        """Run (or resume, or keep) one study or family; returns its id once every study is complete."""
        name = self.name(stage, run, dataset_id)
        found = self._find(name, run.family)
        if found is None:
            argv = ["run", run.preset, "--dataset", dataset_id, "--name", name]
            for key, value in run_overrides(run, self.args.scale).items():
                argv += ["--set", assignment(key, value)]
            # 1: the study completed and an audit failed (or it did not complete: checked below).
            codes = [self.command(stage, [*argv, *self._executor_options()], ok=_STUDY_OK)]
            found = self._find(name, run.family)
        else:
            _, unfinished = found
            codes = [  # an interrupted run: its jobs go on from their checkpoints
                self.command(stage, ["resume", study_id, *self._executor_options()], ok=_STUDY_OK)
                for study_id in unfinished
            ]
            found = self._find(name, run.family)
        if found is None or found[1]:
            raise HierconsoleError(
                f"replicate: stage {stage}: {name} did not complete; see {self.folder / 'logs' / f'{stage}.log'}"
            )
        if any(codes) and self.on_warning is not None:
            self.on_warning(
                f"{stage}: {name} completed with a failed audit; `hierconsole --home {self.home} audit` says "
                "which (table S12 lists every audit)"
            )
        return found[0]

    def _find(self, name: str, family: bool) -> tuple[str, list[str]] | None:
        """(id, its unfinished studies) of the newest study or family of this name, or None."""
        with Store(self.home, read_only=True) as store:
            if family:
                rows = [f for f in list_families(store) if f.name == name]
                if not rows:
                    return None
                fam = rows[-1]
                return fam.family_id, [m.study_id for m in fam.members if m.phase != Phase.COMPLETE]
            studies = [s for s in read.list_studies(store) if s.name == name]
            if not studies:
                return None
            study = studies[-1]
            return study.study_id, [] if study.phase == Phase.COMPLETE else [study.study_id]

    def _executor_options(self) -> list[str]:
        argv: list[str] = []
        if self.args.executor is not None:
            argv += ["--executor", self.args.executor]
        if self.args.ray_address is not None:
            argv += ["--ray-address", self.args.ray_address]
        return argv

    def _rescore(self, stage: str, factorial_stage: str, aggregation: str) -> StageAction:
        def act(upstream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
            (study_id,) = upstream[factorial_stage].values()
            with Store(self.home, read_only=True) as store:
                done = aggregation in read.aggregations(store, study_id)
            if not done:
                self.command(stage, ["rescore", study_id, "--aggregate", aggregation])
            return {"rescored": f"{study_id}:{aggregation}"}

        return act
