"""Every way a number leaves the tool: how a number reads (`numbers`, the one formatter), the table model
(`grid`), the one renderer that fits a table to a width without cutting a number (`render`), the domain's
tables built from read-layer results (`tables`), the notebook's long frames (`frames`), the `--json`
documents (`json_output`), exported files (`export`: CSV, Parquet, JSON, Markdown, LaTeX) and the report
with its figures (`report`). The CLI prints what it renders; the console shows the same renderables in its
views. Nothing here opens the store or computes a statistic."""
