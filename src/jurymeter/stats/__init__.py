"""The statistics: designs, G-study and D-study, bootstrap, diagnostics, blocks of records, ranking (no I/O)."""
