"""Long item-set names: accepted, stored under short folder names, listed and read back whole.

A name whose folder name would exceed the file systems' segment limit used to be
quarantined (``invalid_item_set``). Now its folder is a readable prefix and the
name's SHA-256, and the full name lives in the folder (``_item_set.json``). The
same expectations hold on a local store and on S3 (moto's server); the names'
own strings are the reference.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from ingest_util import run_ingest, write_jsonl
from jurymeter.cli import app
from jurymeter.errors import StoreError
from jurymeter.io.naming import MAX_ENCODED_LENGTH, encode_item_set
from jurymeter.io.store import Store

ITEM_SET_FILE = "_item_set.json"  # the name file of a digested folder (docs/schema.md, Layout)


def _multibyte_name(size: int) -> str:
    """A name of exactly ``size`` UTF-8 bytes, mostly 2-, 3- and 4-byte characters."""
    unit = "ünïcödé-漢字テスト-🙂🎲-"
    name = ""
    while len((name + unit).encode()) <= size:
        name += unit
    while len(name.encode()) < size:
        name += "x"
    return name


NAME_300 = "a-very-long-benchmark-name/" + "x" * 273
NAME_5000 = _multibyte_name(5000)
# Two long names equal up to their last character: a truncated folder name alone would collide.
TWIN_A = "t" * 299 + "A"
TWIN_B = "t" * 299 + "B"
SHORT = "mt-bench"
FITS = "É" * 40  # 240 bytes once encoded: the longest kind of name that always had its folder
NAMES = [NAME_300, NAME_5000, TWIN_A, TWIN_B, SHORT, FITS]


def test_the_names_are_the_sizes_the_cases_claim() -> None:
    assert len(NAME_300.encode()) == 300
    assert len(NAME_5000.encode()) == 5000
    assert len(NAME_5000) < 5000  # multibyte
    assert len(encode_item_set(FITS)) == MAX_ENCODED_LENGTH


def _records(names: list[str], per_name: int = 3) -> list[dict]:
    return [
        {
            "item_set": name,
            "item_id": f"q{k}",
            "system_id": "s1",
            "judge_id": "j1",
            "score": float(1 + (n * per_name + k) % 10),
        }
        for n, name in enumerate(names)
        for k in range(per_name)
    ]


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store_url(request, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "store")
    moto_s3 = request.getfixturevalue("moto_s3")
    return f"s3://{moto_s3.bucket}/store"


def _folders(store: Store) -> list[str]:
    """The item_set= folder names that hold parts."""
    return sorted({f.path.split("item_set=")[1].split("/")[0] for f in store.data_files("pointwise")})


def test_long_names_are_ingested_listed_and_scanned_back(store_url: str, tmp_path: Path) -> None:
    records = _records(NAMES)
    source = write_jsonl(tmp_path / "dump.jsonl", records)
    report = run_ingest(Store(store_url), source)  # reconciled against the committed files
    (result,) = report.sources
    assert (result.read, result.accepted, result.quarantined, result.reasons) == (18, 18, 0, {})

    store = Store(store_url)  # a fresh reader: names come from the store, not a writer's memory
    assert store.item_sets("pointwise") == sorted(NAMES)
    for name in NAMES:
        frame = store.scan("pointwise", name).collect().sort("item_id")
        want = [r for r in records if r["item_set"] == name]
        assert frame["item_set"].to_list() == [name] * len(want)
        assert frame["score"].to_list() == [r["score"] for r in want]
        assert {f.item_set for f in store.data_files("pointwise", name)} == {name}
    whole = store.scan("pointwise").collect()
    assert sorted(whole["item_set"].unique().to_list()) == sorted(NAMES)
    assert whole.height == len(records)

    folders = _folders(store)
    assert len(folders) == len(NAMES)  # the twins do not collide
    assert all(len(f.encode()) <= MAX_ENCODED_LENGTH for f in folders)
    # Names that always fitted keep their exact folder names (older stores stay readable).
    assert encode_item_set(SHORT) in folders
    assert encode_item_set(FITS) in folders


def test_a_long_name_dedups_across_sources_like_a_short_one(store_url: str, tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", _records([NAME_5000]))
    again = [*_records([NAME_5000]), {**_records([NAME_5000])[0], "item_id": "new"}]
    second = write_jsonl(tmp_path / "b.jsonl", again)
    run_ingest(Store(store_url), first)
    (result,) = run_ingest(Store(store_url), second).sources
    assert (result.accepted, result.duplicates_dropped) == (1, 3)
    assert Store(store_url).scan("pointwise", NAME_5000).collect().height == 4


def test_long_names_through_the_streaming_path_and_the_cli(tmp_path: Path) -> None:
    """A clean local dump streams (no fallback for a long name); ``info`` prints the full names."""
    records = [r | {"generation": 0, "replicate": 0} for r in _records([NAME_300, SHORT], per_name=600)]
    source = write_jsonl(tmp_path / "dump.jsonl", records)
    store = Store(str(tmp_path / "store"))
    run_ingest(store, source)
    streamed = [f for f in store.data_files() if "-s0" in f.path.rsplit("/", 1)[-1]]
    assert {f.item_set for f in streamed} == {NAME_300, SHORT}
    result = CliRunner().invoke(app, ["store", "info", "--store", str(tmp_path / "store"), "--json"])
    assert result.exit_code == 0, result.output
    listed = {row["item_set"] for row in orjson.loads(result.stdout)["item_sets"]}
    assert listed == {NAME_300, SHORT}


def test_a_missing_or_wrong_name_file_is_a_store_error(tmp_path: Path) -> None:
    from jurymeter.io import store as store_module

    assert store_module.ITEM_SET_FILE == ITEM_SET_FILE
    store = Store(str(tmp_path / "store"))
    run_ingest(store, write_jsonl(tmp_path / "x.jsonl", _records([TWIN_A])))
    name_file = Path(store.path(store.partition_dir("pointwise", TWIN_A), ITEM_SET_FILE))
    assert orjson.loads(name_file.read_bytes()) == {"item_set": TWIN_A}
    name_file.write_bytes(orjson.dumps({"item_set": TWIN_B}))
    with pytest.raises(StoreError, match="does not hold the name of its folder"):
        Store(str(tmp_path / "store")).item_sets("pointwise")
    name_file.unlink()
    with pytest.raises(StoreError, match="is missing"):
        Store(str(tmp_path / "store")).item_sets("pointwise")


@pytest.mark.s3
def test_s3_keys_of_long_names_are_short_and_carry_the_name_file(tmp_path: Path, moto_s3) -> None:
    from jurymeter.io.naming import item_set_folder

    url = f"s3://{moto_s3.bucket}/store"
    run_ingest(Store(url), write_jsonl(tmp_path / "x.jsonl", _records([NAME_5000, SHORT])))
    listing = moto_s3.client.list_objects_v2(Bucket=moto_s3.bucket, Prefix="store/data/")
    keys = [o["Key"] for o in listing["Contents"]]
    folder = f"store/data/protocol=pointwise/item_set={item_set_folder(NAME_5000)}"
    assert f"{folder}/{ITEM_SET_FILE}" in keys
    assert all(len(k.split("/")[3].encode()) <= len("item_set=") + MAX_ENCODED_LENGTH for k in keys)
    body = moto_s3.client.get_object(Bucket=moto_s3.bucket, Key=f"{folder}/{ITEM_SET_FILE}")["Body"]
    assert orjson.loads(body.read()) == {"item_set": NAME_5000}
    assert pl.Series(Store(url).item_sets("pointwise")).to_list() == sorted([NAME_5000, SHORT])

