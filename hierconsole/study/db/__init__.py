"""The store: the DuckDB connection and schema (`storage`), the SQL views rendered from the vocabulary
(`views`), datasets (`catalog`), study records, job and run ids, split files, the live snapshot a second
shell reads, backups, and the replication's stage records and calibrations.
The only modules that hold a DuckDB connection; the lowest layer of `study`."""
