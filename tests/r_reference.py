"""The one check that R and its packages are installed, for the tests whose reference is R (lme4, ordinal).

In CI (``CI`` set) a missing R is a failure, not a skip: ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def r_available(*packages: str) -> bool:
    """Whether ``Rscript`` runs and loads every one of ``packages``."""
    if shutil.which("Rscript") is None:
        return False
    libraries = "; ".join(f"library({p})" for p in packages) or "invisible(0)"
    return subprocess.run(["Rscript", "-e", libraries], capture_output=True).returncode == 0


def needs_r(*packages: str) -> pytest.MarkDecorator:
    """Skip a test without ``Rscript`` and ``packages`` (outside CI), naming the Debian packages to install."""
    debian = " ".join(["r-base-core", *(f"r-cran-{p.lower()}" for p in packages)])
    return pytest.mark.skipif(
        not r_available(*packages) and not os.environ.get("CI"),
        reason=f"Rscript with {' and '.join(packages)} not installed (apt-get install {debian})",
    )
