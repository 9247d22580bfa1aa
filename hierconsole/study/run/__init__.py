"""Planning and running studies: presets become studies and job specs (`plan`, `lifecycle`), families
become member studies (`families`), re-scoring queues jobs (`rescoring`), the `orchestrator` launches
queued jobs through an executor and `ingest` writes their events into the store."""
