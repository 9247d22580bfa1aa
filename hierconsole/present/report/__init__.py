"""The HTML and Markdown report and its figures: figures/ (one module per kind, Agg backend), document
(sections -> HTML or Markdown), study_report (a study's and a family's sections), output (writing one),
replication_tables (the replication's tables as files)."""
