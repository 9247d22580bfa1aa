"""Computations over per-seed tables and stored rows: the per-seed table (`per_seed`, `per_seed_csv`),
arm summaries (`arms`), simple effects (`effects`), redistribution, cross-study contrasts, effects pooled
over studies (`pooled`), summaries and intervals (`statistics`), the fairness audits (`audits`) and the
exportable frames (`frames`). Pure functions of frames wherever the store is not needed."""
