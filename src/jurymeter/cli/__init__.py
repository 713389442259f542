"""The ``jurymeter`` command line (typer + rich): options, printing, exit codes."""

import os

# One BLAS thread in a command's process, as in the nightly run's Dask workers
# (distributed's nanny sets OPENBLAS_NUM_THREADS and MKL_NUM_THREADS to 1 before a
# worker starts), so a command fits as a worker does. Set before numpy is first
# imported (OpenBLAS reads it when it loads); a value the user set is kept. Not
# OMP_NUM_THREADS, which the nanny sets too: pyarrow sizes its thread pool by it,
# and the ingest reads with pyarrow. The fits' products are small (systems x
# items): on a quiet machine a second thread saves ~0.01 s, and on a busy one
# OpenBLAS's threads wait for a core: one `jurymeter gstudy` of 10M records spent
# 0.6-0.75 CPU-s in 13 products of 64 x 2000 x 100 that one thread does in 0.013 s,
# and the whole command 1.3 s more (bench/RESULTS.md, the note under "Whole
# `jurymeter gstudy` from the merged cell statistics" of 2026-12-02 19:32 UTC).
for _name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from jurymeter.cli.app import app, main  # noqa: E402 - after the threads are set

__all__ = ["app", "main"]
