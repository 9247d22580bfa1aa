"""The worker's half: everything that runs in a worker process and needs torch.

Geometry, projector, losses and strict retrieval metrics; the lockstep trainer with its batched fast path
(`batched`, `fused`, `optim`) beside the per-cell reference; checkpoints and determinism; the evaluator;
and the process entry point (`worker`). Nothing here imports `hierconsole.study`, the CLI or the console:
a worker reads its `contract.jobspec.JobSpec` and writes `contract.events`, and never opens the store.
"""
