"""The Prefect flow and its runtime (a temporary Prefect server, a LocalCluster): the only Prefect and Dask code."""
