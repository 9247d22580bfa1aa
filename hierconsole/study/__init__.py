"""The orchestrator's half: everything that runs beside the store and never needs torch, in rooms by role.

- `db`: the store (the only modules that open a DuckDB connection): connection and schema, the SQL views
  rendered from the vocabulary, datasets (catalog), study records, split files, the live snapshot.
- `run`: presets become studies and jobs (`plan`, `lifecycle`, `families`, `rescoring`), queued jobs become
  workers (`orchestrator`), their events become rows (`ingest`).
- `executors`: how a worker process is started and watched: local subprocesses (with warm standbys), Ray
  actors, the device probe.
- `analysis`: computations over per-seed tables and stored rows: arm summaries, effects, redistribution,
  cross-study contrasts, pooled effects, statistics, the audits, the exportable frames.
- `read`: the one read layer every front end shows, ending at what the user sees.
- `report`: what leaves the tool: export writers (and figures and reports).
- `replication`: the paper's replication: its stage graph, stages, inputs and time estimate.

Layers, held by import-linter: `replication` above `read`, `run` and `report`, above `analysis` and
`executors`, above `db`.
Nothing here imports `hierconsole.engine`: workers are started by module name and talk back through
`hierconsole.contract`.
"""
