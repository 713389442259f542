"""Reading judgment logs and the store: sources, validation, ingest, the partitioned Parquet store (the only I/O)."""
