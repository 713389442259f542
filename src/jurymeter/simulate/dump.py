"""Writing a simulated dump: JSON Lines, registries and ``truth.json`` (the package's only I/O)."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import polars as pl

from jurymeter.errors import SimulationError
from jurymeter.simulate.faults import _make_faults
from jurymeter.simulate.params import SimulatedDump, _is_int


def _ndjson(frame: pl.DataFrame) -> bytes:
    if frame.height == 0:
        return b""
    return frame.write_ndjson().encode()


def write_dump(
    dump: SimulatedDump, out_dir: str | Path, *, faults: int = 0, seed: int = 0
) -> dict[str, Path]:
    """Write a simulated dump as JSON Lines plus ``truth.json``.

    Parameters
    ----------
    dump : SimulatedDump
        Output of :func:`simulate_dump`; it is not modified.
    out_dir : str or Path
        Directory to write into (created if missing); existing files of the
        same names are overwritten.
    faults : int, default 0
        Number of bad records appended after the clean ones, cycling over
        :data:`FAULT_KINDS`.  Pointwise-only kinds go to ``pointwise.jsonl``,
        pairwise-only kinds to ``pairwise.jsonl``, and ``malformed_line`` /
        ``missing_field`` alternate between the two, pointwise first.
    seed : int, default 0
        Seed choosing which clean records the faults are derived from.

    Returns
    -------
    dict of str to Path
        Keys ``pointwise``, ``pairwise``, ``systems``, ``judges``, ``truth``.

    Raises
    ------
    SimulationError
        If ``faults`` or ``seed`` is not a non-negative int, or a fault kind
        needs records that the dump does not have.

    Notes
    -----
    ``truth.json`` is ``dump.truth`` with ``faults`` filled in:
    ``counts[kind]`` is the number of faulty lines appended of that kind and
    ``lines[file][kind]`` their 1-based line numbers; for
    ``conflicting_duplicate`` the list also holds the clean original each copy
    conflicts with, since both lines then form the conflict.  Every other
    fault gets a fresh ``replicate`` (``n_replicates + ordinal``) so it is one
    kind only.  The same dump, ``faults`` and ``seed`` give byte-identical files.
    """
    if not _is_int(faults) or faults < 0:
        msg = f"write_dump: faults must be a non-negative int; got {faults!r}"
        raise SimulationError(msg)
    if not _is_int(seed) or seed < 0:
        msg = f"write_dump: seed must be a non-negative int; got {seed!r}"
        raise SimulationError(msg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    truth = copy.deepcopy(dump.truth)
    extra: dict[str, list[str]] = {"pointwise.jsonl": [], "pairwise.jsonl": []}
    if faults:
        extra, truth["faults"] = _make_faults(dump, int(faults), int(seed))
    paths = {
        "pointwise": out / "pointwise.jsonl",
        "pairwise": out / "pairwise.jsonl",
        "systems": out / "systems.jsonl",
        "judges": out / "judges.jsonl",
        "truth": out / "truth.json",
    }
    for name, frame in (("pointwise", dump.pointwise), ("pairwise", dump.pairwise)):
        tail = "".join(line + "\n" for line in extra[f"{name}.jsonl"]).encode()
        paths[name].write_bytes(_ndjson(frame) + tail)
    paths["systems"].write_bytes(_ndjson(dump.systems))
    paths["judges"].write_bytes(_ndjson(dump.judges))
    paths["truth"].write_bytes(orjson.dumps(truth, option=orjson.OPT_INDENT_2) + b"\n")
    return paths
