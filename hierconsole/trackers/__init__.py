"""Experiment trackers a study's runs can be exported to (`hierconsole export mlflow`).

Each tracker's package is an optional extra, imported only inside that tracker's module when an export
runs; what is exported is built by the read layer (`hierconsole.study.read.tracking`), tracker-neutral.
"""
