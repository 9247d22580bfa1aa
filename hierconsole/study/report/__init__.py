"""What leaves the tool as files: the export writers (CSV, Parquet, JSON, Markdown, LaTeX)."""
