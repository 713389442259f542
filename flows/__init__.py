"""Orchestration over the jurymeter library (Prefect and Dask live here, never in src/)."""
