"""The store: the DuckDB connection and schema (`storage`), the SQL views rendered from the vocabulary
(`views`), datasets (`catalog`), study records, split files and the live snapshot a second shell reads.
The only modules that hold a DuckDB connection; the lowest layer of `study`."""
