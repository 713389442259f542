"""The nightly deployment's entry point (``infra/prefect.yaml``: ``flows/nightly.py:nightly``).

The flow itself is :func:`jurymeter.orchestration.flow.nightly`, inside the
installed package, so that ``jurymeter run`` works from a wheel; this file is
what a Prefect deployment run from a checkout points at.
"""

from jurymeter.orchestration.flow import nightly

__all__ = ["nightly"]

if __name__ == "__main__":
    nightly()
