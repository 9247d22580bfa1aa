"""Pure computations on what the read layer hands them: the per-seed table (`per_seed`), the one paired
summary (`paired`), arm summaries (`arms`), simple effects (`effects`), redistribution, cross-study
contrasts, effects pooled over studies (`pooled`), arms over outer splits (`outer_arms`), intervals and
tests (`statistics`), the audits' checks (`audits/`) and the exportable frames (`frames`). Nothing here
opens the store (a user's per-seed CSV is read by `study.read.per_seed_csv`, the audits' evidence by
`study.read.audit_evidence`)."""
