"""Freeze lme4's REML components on large incomplete item sets: ``tests/data/lme4_incomplete.json``.

Usage (from the repository root; needs Rscript with lme4, about 5 minutes per case)::

    uv run python tests/r/make_lme4_incomplete.py                 # every case of tests/incomplete_design.py
    uv run python tests/r/make_lme4_incomplete.py cells_5pct      # one case, merged into the file

Each case's records are simulated by ``tests/incomplete_design.py`` from its seed
(draw 0), written to a temporary CSV (not committed: about 10 MB a case) and fitted
by ``tests/r/lme4_incomplete.R`` (REML, bobyqa). The file records, per case, the
sizes, seed, missing pattern, formula, rows, a checksum of the data (so
``tests/test_vs_lme4_incomplete.py`` can tell it regenerated the same records),
the R and lme4 versions, lmer's seconds and lme4's components.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from incomplete_design import CASES, FORMULA, SPEC, checksum, records  # noqa: E402

SCRIPT = HERE / "lme4_incomplete.R"
REFERENCE = HERE.parent / "data" / "lme4_incomplete.json"


def fit_case(name: str) -> dict[str, object]:
    """The frozen entry of one case: its description, the data's checksum and lme4's fit."""
    case = next(c for c in CASES if c.name == name)
    frame = records(case)
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "data.csv"
        frame.select(s="system_id", i="item_id", j="judge_id", score="score").write_csv(csv, float_precision=17)
        out = Path(tmp) / "fit.json"
        subprocess.run(["Rscript", str(SCRIPT), str(csv), FORMULA, str(out)], check=True)
        fit = orjson.loads(out.read_bytes())
    assert fit["rows"] == frame.height, (fit["rows"], frame.height)
    return {
        "spec": SPEC,
        "sizes": dict(zip("sijr", case.sizes, strict=True)),
        "seed": case.seed,
        "pattern": case.pattern,
        "missing": case.missing,
        "missing_pattern": case.describe(),
        "formula": FORMULA,
        "rows": frame.height,
        "checksum": checksum(frame),
        **fit,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    opts = parser.parse_args(argv)
    names = opts.cases or [c.name for c in CASES]
    for name in names:
        entry = fit_case(name)
        # Re-read before writing: cases may be fitted by separate processes.
        reference = orjson.loads(REFERENCE.read_bytes()) if REFERENCE.exists() else {}
        reference.setdefault("generator", "tests/r/make_lme4_incomplete.py (data: tests/incomplete_design.py)")
        reference.setdefault("cases", {})[name] = entry
        REFERENCE.write_bytes(orjson.dumps(reference, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
        print(f"{name}: {entry['rows']} rows, lmer {entry['lmer_seconds']:.1f} s -> {REFERENCE}")


if __name__ == "__main__":
    main()
