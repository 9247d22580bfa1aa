"""The orchestrator's half: everything that runs beside the store and never needs torch, in rooms by role.

- `commands`: the front door: every verb a front end runs (launch, resume, cancel, delete, rescore, import
  or delete a dataset, doctor's repair) and the orchestrator that drives their jobs,
  each input checked there once.
- `db`: the store (the only modules that open a DuckDB connection): connection and schema, the SQL views
  rendered from the vocabulary, datasets (catalog), study records, split files, the live snapshot, backups,
  the replication's stage records and calibrations.
- `run`: presets become studies and jobs (`plan`, `lifecycle`, `families`, `rescoring`), queued jobs become
  workers (`orchestrator`), their events become rows (`ingest`).
- `executors`: how a worker process is started and watched: local subprocesses (with warm standbys), Ray
  actors, the device probe.
- `analysis`: pure computations on what the read layer hands them: the per-seed tables, the one paired
  summary, arm summaries, effects, redistribution, cross-study contrasts, pooled effects, arms over outer
  splits, statistics, the audits' checks, the exportable frames, the paper's tables (read from `paper/`).
- `read`: the one read layer every front end shows, ending at what the user sees, and the evidence the
  audits and the lock read.
- `replication`: the paper's replication as a plan: its stage graph, stages, inputs and time estimate;
  `commands.replicate` runs its stages through the front door's own verbs.

What leaves the tool (grids, exported files, figures, the report) is `hierconsole.present`'s.

Layers, held by import-linter: `commands` above `replication`, above `run`, above `read`, above `analysis`
and `executors` (pure: no store), above `db`.
Nothing here imports `hierconsole.engine`: workers are started by module name and talk back through
`hierconsole.contract`. The one exception is the replication's calibration (`replication.calibration`),
which times the engine's training step and the extractor in this process, importing them only when it
measures.
"""
