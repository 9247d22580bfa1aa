"""What crosses the process boundary between the orchestrator and a worker: the job spec it is handed and
the typed events it writes back. Free of torch and of SQL, so both halves (and every executor) share it.
"""
