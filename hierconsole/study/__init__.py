"""The orchestrator's half: everything that runs beside the store and never needs torch.

Presets become studies and jobs (`lifecycle`, `plan`), queued jobs become worker processes
(`orchestrator`, started by an executor: local subprocesses or Ray actors, `executors`), their events
become rows (`ingest`) in the DuckDB store (`storage`, the only module that connects to it); audits,
analysis (`effects`, `rescoring`) and `export` work from those rows, and `read` is the one read layer
every front end shows. All SQL lives in this package. Nothing here imports
`hierconsole.engine`: workers are started by module name and talk back through `hierconsole.contract`.
"""
