"""Imported by each LocalCluster worker as it starts (Dask's ``preload``; see ``flows.runtime``).

The modules a fit needs (scipy, matplotlib: 2.7-2.9 s) are imported while the
Prefect server starts, instead of delaying each worker's first fit.
"""

from jurymeter.nightly import import_fit_modules

import_fit_modules()
