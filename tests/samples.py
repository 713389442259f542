"""Where the real judgment-log samples are: a copy in the repository (tests/data/samples, from
``../shared/samples``; each folder's README names its source and licence), so the adapter tests
hold on any clone."""

from pathlib import Path

SAMPLES = Path(__file__).resolve().parent / "data" / "samples"
