r"""Every id a command prints to a terminal has its control characters escaped; ``--json`` stays exact.

A store whose item sets, systems, judges, items, source file name and
quarantined lines carry each class of character a terminal acts on (an ANSI
escape, ``\r``, NUL, the other C0 and C1 controls, DEL, bidi overrides and
isolates, zero-width and line-separator characters, a newline, a tab) and rich's
markup and emoji syntax is written by hand and ingested; then every command that
prints data (``ingest``, ``store info``, ``quarantine``, ``gstudy``, ``cyclic``,
``pairwise``, ``sequential``, the nightly run's summary and headlines, ``report
--summary``) is run. Its stdout and stderr bytes must hold no such character
(found with ``unicodedata``, not the code's own table) and must show each id's
escaped form, written out here by hand; ``--json`` must parse to the stored ids
exactly.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from jurymeter.cli import app
from jurymeter.io.store import Store
from jurymeter.render.text import CONTROL_RANGES, err, json_text, out, safe_text, shorten

# (raw, as a terminal must show it): every class, the escaped form written by hand.
CLASSES: dict[str, tuple[str, str]] = {
    "ansi": ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
    "cr": ("over\rwrite", "over\\rwrite"),
    "nul": ("nul\x00byte", "nul\\x00byte"),
    "c0": ("bell\x07bs\x08", "bell\\x07bs\\x08"),
    "del": ("del\x7f", "del\\x7f"),
    "c1": ("csi\x9b31m", "csi\\x9b31m"),
    "bidi": ("evil\u202etxt", "evil\\u202etxt"),
    "isolate": ("iso\u2066x\u2069", "iso\\u2066x\\u2069"),
    "zero_width": ("zw\u200bsp\ufeff", "zw\\u200bsp\\ufeff"),
    "separator": ("ls\u2028ps\u2029", "ls\\u2028ps\\u2029"),
    "newline": ("two\nlines", "two\\nlines"),
    "tab": ("tab\tbed", "tab\\tbed"),
    "markup": ("[/]x[bold]", "[/]x[bold]"),
    "emoji": (":cat:", ":cat:"),
}
CONTROL_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}

SYSTEMS = [f"s-{raw}" for raw, _ in CLASSES.values()]
SYSTEMS_SHOWN = [f"s-{shown}" for _, shown in CLASSES.values()]
JUDGES = ["j-plain", "j-\x1b[31mred", "j-\u202eevil", "j-two\nlines"]
JUDGES_SHOWN = ["j-plain", "j-\\x1b[31mred", "j-\\u202eevil", "j-two\\nlines"]
# Short enough for a table's cell (the pairwise and sequential sets add a suffix); the systems carry every class.
ITEM_SET = "set\x1b[31m\r\x00\x9b\u202e\n[/]"
ITEM_SET_SHOWN = "set\\x1b[31m\\r\\x00\\x9b\\u202e\\n[/]"
SOURCE_NAME = "dump-\x1b[31m\u202e.jsonl"
SOURCE_SHOWN = "dump-\\x1b[31m\\u202e.jsonl"


def raw_controls(data: bytes) -> list[str]:
    """The characters a terminal would act on in ``data`` (newlines apart), as U+XXXX."""
    text = data.decode("utf-8")
    return sorted({f"U+{ord(c):04X}" for c in text if c != "\n" and unicodedata.category(c) in CONTROL_CATEGORIES})


def _pointwise(rng: np.random.Generator) -> list[dict[str, Any]]:
    return [
        {"item_set": ITEM_SET, "item_id": f"i{i}-{raw}", "system_id": system, "judge_id": judge, "generation": g,
         "score": int(rng.integers(1, 11))}
        for system in SYSTEMS for i, (raw, _) in enumerate(list(CLASSES.values())[:5])
        for judge in JUDGES for g in range(2)
    ]


def _pairwise(rng: np.random.Generator) -> list[dict[str, Any]]:
    rows = []
    for k, a in enumerate(SYSTEMS):
        for b in SYSTEMS[k + 1:]:
            for item in range(3):
                for judge in JUDGES[:2]:
                    for first, second in ((a, b), (b, a)):
                        rows.append({"item_set": ITEM_SET + "-pair", "item_id": f"p{item}", "system_a": first,
                                     "system_b": second, "judge_id": judge,
                                     "winner": ["A", "B", "tie"][int(rng.integers(0, 3))]})
    return rows


def _sequential(rng: np.random.Generator) -> list[dict[str, Any]]:
    rows = []
    for judge in JUDGES[:2]:
        for batch in range(30):
            for position, unit in enumerate(rng.permutation(len(SYSTEMS))):
                rows.append({"item_set": ITEM_SET + "-seq", "item_id": f"{judge}-{batch}-{position}",
                             "system_id": SYSTEMS[int(unit)], "judge_id": judge, "batch_id": f"{judge}-b{batch}",
                             "batch_position": position, "score": int(rng.integers(0, 2))})
    return rows


BAD_LINES = [
    json.dumps({"item_set": ITEM_SET, "item_id": "bad", "system_id": SYSTEMS[0], "judge_id": JUDGES[1],
                "score": "high\x1b[31m\u202e"}),
    "not json \x1b[2J\r\x00 \u202e",
]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(5)
    source = root / SOURCE_NAME
    source.write_text("".join(json.dumps(r) + "\n" for r in _pointwise(rng)) + "\n".join(BAD_LINES) + "\n")
    others = []
    for name, rows in (("pairwise.jsonl", _pairwise(rng)), ("sequential.jsonl", _sequential(rng))):
        others.append(root / name)
        others[-1].write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store(str(root / "store"))
    runner = CliRunner()
    ingested = runner.invoke(app, ["ingest", str(source), *map(str, others), "--store", store.url])
    return {"root": root, "store": store, "source": source, "ingest": ingested, "runner": runner}


def _invoke(hostile: dict[str, Any], *args: str) -> Any:
    result = hostile["runner"].invoke(app, [*args, "--store", hostile["store"].url])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def _assert_safe(result: Any, *shown: str) -> str:
    """No raw control character on stdout or stderr, and each ``shown`` escaped form on stdout."""
    assert not out.is_terminal
    assert not err.is_terminal  # a forced terminal would add rich's own styling escapes
    assert raw_controls(result.stdout_bytes) == []
    assert raw_controls(result.stderr_bytes) == []
    text = result.stdout
    for form in shown:
        assert form in text, form
    return text


# ---------------------------------------------------------------- the function


@pytest.mark.parametrize("name", list(CLASSES))
def test_each_class_is_escaped_as_written_by_hand(name: str) -> None:
    raw, shown = CLASSES[name]
    assert safe_text(raw) == shown
    assert raw_controls(safe_text(raw).encode()) == []


def test_plain_text_backslashes_and_letters_are_kept() -> None:
    for text in ("plain", "C:\\path\\x1b", "é 中文 😀", "nbsp\u00a0here", "{\"a\": \"b\\\"c\"}"):
        assert safe_text(text) == text
    assert safe_text(7) == "7"
    assert safe_text("a\nb", newlines=True) == "a\nb"
    assert safe_text("a\r\nb", newlines=True) == "a\\r\nb"
    assert safe_text("\udc80x") == "\\udc80x"  # a lone surrogate (cannot even be encoded raw)
    assert safe_text("tag\U000e0041") == "tag\\U000e0041"


def test_the_control_table_is_unicodes_categories() -> None:
    """The hard-coded ranges are exactly the code points of categories Cc, Cf, Cs, Zl and Zp (brute force)."""
    listed = {c for a, b in CONTROL_RANGES for c in range(a, b + 1)}
    derived = {c for c in range(0x110000) if unicodedata.category(chr(c)) in CONTROL_CATEGORIES}
    assert listed == derived


def test_shorten_cuts_between_escapes_and_says_how_much() -> None:
    assert shorten("abc", 10) == "abc"
    assert shorten("abcdefghij" * 3, 10) == "abcdefghij... (+20 characters)"
    # "\x1b" becomes four characters; the cut never splits them
    assert shorten("ab\x1bcd", 4) == "ab... (+3 characters)"
    assert shorten("ab\x1bcd", 6) == "ab\\x1b... (+2 characters)"


def test_json_text_escapes_what_json_allows_and_parses_to_the_same_value() -> None:
    value = {raw: [raw, {"k": raw}] for raw, _ in CLASSES.values()}
    text = json_text(value)
    assert raw_controls(text.encode()) == []
    assert json.loads(text) == value
    assert "\\u202e" in text
    assert "\\u009b" in text
    assert "\\u007f" in text
    assert json.loads(json_text("tag\U000e0041")) == "tag\U000e0041"


# ---------------------------------------------------------------- every command


def test_ingest(hostile: dict[str, Any]) -> None:
    result = hostile["ingest"]
    assert result.exit_code == 0, result.output
    text = _assert_safe(result, SOURCE_SHOWN, "high\\x1b[31m\\u202e", "not json \\x1b[2J\\r\\x00 \\u202e")
    assert "first quarantined records" in text


def test_ingest_json_is_exact(hostile: dict[str, Any], tmp_path: Path) -> None:
    source = tmp_path / SOURCE_NAME
    source.write_text(hostile["source"].read_text())
    result = hostile["runner"].invoke(app, ["ingest", str(source), "--store", str(tmp_path / "s"), "--json"])
    assert result.exit_code == 0, result.output
    assert raw_controls(result.stdout_bytes) == []
    (entry,) = json.loads(result.stdout)["sources"]
    assert entry["source"] == str(source)


def test_store_info(hostile: dict[str, Any]) -> None:
    text = _assert_safe(_invoke(hostile, "store", "info"), ITEM_SET_SHOWN, *JUDGES_SHOWN, SOURCE_SHOWN)
    assert "wrong_type" in text


def test_store_info_json_is_exact(hostile: dict[str, Any]) -> None:
    result = _invoke(hostile, "store", "info", "--json")
    assert raw_controls(result.stdout_bytes) == []
    payload = json.loads(result.stdout)
    assert {r["item_set"] for r in payload["item_sets"]} == {ITEM_SET, ITEM_SET + "-pair", ITEM_SET + "-seq"}
    assert {r["judge_id"] for r in payload["judges"]} == set(JUDGES)


def test_quarantine(hostile: dict[str, Any]) -> None:
    _assert_safe(_invoke(hostile, "quarantine"), SOURCE_SHOWN, "high\\x1b[31m\\u202e",
                 "not json \\x1b[2J\\r\\x00 \\u202e")


def test_quarantine_json_is_exact(hostile: dict[str, Any]) -> None:
    result = _invoke(hostile, "quarantine", "--json")
    assert raw_controls(result.stdout_bytes) == []
    assert raw_controls(result.stderr_bytes) == []
    assert sorted(r["raw"] for r in json.loads(result.stdout)) == sorted(BAD_LINES)


def test_gstudy(hostile: dict[str, Any]) -> None:
    _assert_safe(_invoke(hostile, "gstudy", "--item-set", ITEM_SET, "--boot", "20"), ITEM_SET_SHOWN)


def test_gstudy_json_is_exact(hostile: dict[str, Any]) -> None:
    result = _invoke(hostile, "gstudy", "--item-set", ITEM_SET, "--boot", "20", "--json")
    assert raw_controls(result.stdout_bytes) == []
    assert json.loads(result.stdout)["item_set"] == ITEM_SET


def test_cyclic(hostile: dict[str, Any]) -> None:
    _assert_safe(_invoke(hostile, "cyclic", "--item-set", ITEM_SET), ITEM_SET_SHOWN, *SYSTEMS_SHOWN,
                 *JUDGES_SHOWN)


def test_cyclic_json_is_exact(hostile: dict[str, Any]) -> None:
    result = _invoke(hostile, "cyclic", "--item-set", ITEM_SET, "--json")
    assert raw_controls(result.stdout_bytes) == []
    assert set(json.loads(result.stdout)["systems"]) == set(SYSTEMS)


def test_pairwise(hostile: dict[str, Any]) -> None:
    _assert_safe(_invoke(hostile, "pairwise", "--item-set", ITEM_SET + "-pair", "--boot", "30",
                         "--permutations", "30"), ITEM_SET_SHOWN + "-pair", *SYSTEMS_SHOWN, *JUDGES_SHOWN[:2])


def test_pairwise_json_is_exact(hostile: dict[str, Any]) -> None:
    result = _invoke(hostile, "pairwise", "--item-set", ITEM_SET + "-pair", "--boot", "30", "--permutations", "30",
                     "--json")
    assert raw_controls(result.stdout_bytes) == []
    report = json.loads(result.stdout)
    assert set(report["judges"]) == set(JUDGES[:2])
    assert set(report["bradley_terry"]["systems"]) == set(SYSTEMS)


def test_sequential(hostile: dict[str, Any]) -> None:
    _assert_safe(_invoke(hostile, "sequential", "--item-set", ITEM_SET + "-seq", "--boot", "20",
                         "--simulations", "20"), ITEM_SET_SHOWN + "-seq", *JUDGES_SHOWN[:2])


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font")
def test_the_nightly_summary_headlines_and_report_summary(hostile: dict[str, Any]) -> None:
    from jurymeter.cli.run import print_run_summary
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.pipeline.publish import publish_run

    store, root = hostile["store"], hostile["root"]
    path = root / "run.toml"
    path.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 20\n'
                    "[fit.pairwise]\nn_boot = 30\nn_perm = 30\n[fit.sequential]\nn_boot = 20\nn_sim = 20\n")
    config = load_config(path, environ={})
    plan = plan_fits(store, config)
    outcomes = run_fits(store, plan.jobs, figures=False)
    summary = publish_run(store, "hostile", config=config, started="t", ingest_report=None, outcomes=outcomes,
                          timings={}, skipped=plan.skipped)
    with out.capture() as printed:
        print_run_summary(summary)
    assert raw_controls(printed.get().encode()) == []
    assert ITEM_SET_SHOWN in printed.get()
    assert summary["headlines"]["fits"], summary["headlines"]
    result = _invoke(hostile, "report", "results/hostile", "--summary")
    _assert_safe(result, ITEM_SET_SHOWN)
