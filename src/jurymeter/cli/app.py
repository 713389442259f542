"""The ``jurymeter`` command line (typer + rich).

Every :class:`~jurymeter.errors.JurymeterError` becomes one line on stderr and a
non-zero exit status: 1 for a fatal problem (missing source, unreadable store),
3 when ``--strict`` rejected a source, 4 when ``jurymeter run`` published a run
in which some fits failed. Other exceptions are bugs and keep their traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table

from jurymeter.errors import ConfigError, JurymeterError, StrictModeError

app = typer.Typer(
    help="How far to trust a leaderboard scored by LLM judges.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
store_app = typer.Typer(help="Inspect a judgment store.", no_args_is_help=True)
app.add_typer(store_app, name="store")

# Outside a terminal rich would wrap tables at 80 columns; logs read better wide.
_WIDTH = None if sys.stdout.isatty() else 160
out = Console(highlight=False, width=_WIDTH)
err = Console(stderr=True, highlight=False, soft_wrap=True)

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store folder or s3://bucket/prefix [default: $JURYMETER_STORE or ./jurymeter-store]",
    ),
]
StorageOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        help="KEY=VALUE for S3 (endpoint_url, region, key, secret...); repeatable",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="TOML file with `store` and a [storage_options] table"),
]


def _pairs(values: list[str] | None, what: str) -> dict[str, str]:
    out_: dict[str, str] = {}
    for value in values or []:
        name, sep, rest = value.partition("=")
        if not sep or not name.strip() or not rest.strip():
            # Never echo the value: it may be a credential typed without its name.
            msg = f"{what} expects NAME=VALUE (argument {len(out_) + 1} is not of that form)"
            raise ConfigError(msg)
        out_[name.strip()] = rest.strip()
    return out_


def _load_config(path: Path | None) -> dict[str, Any]:
    path = path or (Path(p) if (p := os.environ.get("JURYMETER_CONFIG")) else None)
    if path is None:
        return {}
    from jurymeter.pipeline.config import read_toml

    return read_toml(path)


def _open_store(store: str | None, storage_option: list[str] | None, config: Path | None):
    from jurymeter.io.store import Store, default_store_url

    settings = _load_config(config)
    options = {
        **{str(k): v for k, v in settings.get("storage_options", {}).items()},
        **_pairs(storage_option, "--storage-option"),
    }
    return Store(store or settings.get("store") or default_store_url(), options)


def _run(fn, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except StrictModeError as exc:
        err.print(f"error: {exc}", markup=False)
        raise typer.Exit(3) from None
    except JurymeterError as exc:
        err.print(f"error: {exc}", markup=False)
        raise typer.Exit(1) from None


@app.command()
def ingest(
    sources: Annotated[list[str], typer.Argument(help="Files, folders or globs; local or s3://")],
    store: StoreOpt = None,
    map_: Annotated[
        list[str] | None,
        typer.Option("--map", help="CANONICAL=SOURCE column rename, e.g. score=rating; repeatable"),
    ] = None,
    item_set: Annotated[
        str | None, typer.Option("--item-set", help="Item set for records that have none")
    ] = None,
    scale: Annotated[
        str | None, typer.Option("--scale", help="Score range LOW,HIGH, e.g. 1,10")
    ] = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail (exit 3) if any record is quarantined")
    ] = False,
    lock_timeout: Annotated[
        float, typer.Option("--lock-timeout", help="Seconds to wait for another ingest")
    ] = 600.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run manifest as JSON")] = False,
    block_mb: Annotated[
        float, typer.Option("--block-mb", help="Megabytes of input per batch (bounds memory)")
    ] = 64.0,
) -> None:
    """Ingest judgment logs into the store, with quarantine and reconciliation."""
    _run(_ingest, sources, store, map_, item_set, scale, storage_option, config, strict,
         lock_timeout, as_json, block_mb)


def _parse_scale(scale: str | None) -> tuple[float, float] | None:
    if scale is None:
        return None
    parts = scale.split(",")
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        msg = f"--scale expects LOW,HIGH (two numbers), got {scale!r}"
        raise ConfigError(msg) from None
    return low, high


def _ingest(sources, store, map_, item_set, scale, storage_option, config, strict,
            lock_timeout, as_json, block_mb) -> None:
    from jurymeter.io.ingest import ingest as run_ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import s3fs_options
    from jurymeter.io.validate import ValidationOptions

    target = _open_store(store, storage_option, config)
    options = ValidationOptions(
        column_map=_pairs(map_, "--map"), item_set=item_set, scale=_parse_scale(scale)
    )
    found = discover_sources(sources, storage_options=s3fs_options(target.storage_options))
    if not block_mb > 0:
        msg = f"--block-mb must be positive, got {block_mb}"
        raise ConfigError(msg)
    progress = _progress("ingest", bytes_=True)
    with progress:
        task_id = progress.add_task("ingest", total=sum(f.size for f in found))
        sizes = {f.url: f.size for f in found}
        report = run_ingest(
            target, found, options, strict=strict, lock_timeout=lock_timeout,
            block_bytes=int(block_mb * 1024 * 1024),
            on_source=lambda r: progress.advance(task_id, sizes.get(r.source, 0)),
        )
    if as_json:
        sys.stdout.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    print_ingest_report(report)


def _progress(label: str, *, bytes_: bool = False) -> Any:
    """A progress bar on stderr, shown only on a terminal (quiet in CI and in logs)."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    count = DownloadColumn() if bytes_ else MofNCompleteColumn()
    return Progress(
        TextColumn(label), BarColumn(), count, TimeElapsedColumn(),
        console=err, disable=not err.is_terminal,
    )


def print_ingest_report(report) -> None:
    table = Table(title=f"ingest {report.run_id} -> {report.store}", title_justify="left")
    for col in ("source", "status", "protocol", "read", "accepted", "quarantined", "duplicates"):
        table.add_column(col, justify="right" if col in ("read", "accepted", "quarantined", "duplicates") else "left")
    for s in report.sources:
        table.add_row(
            s.source, s.status, s.protocol or "-", f"{s.read:,}", f"{s.accepted:,}",
            f"{s.quarantined:,}", f"{s.duplicates_dropped:,}",
        )
    t = report.totals()
    table.add_row("total", "", "", f"{t['read']:,}", f"{t['accepted']:,}",
                  f"{t['quarantined']:,}", f"{t['duplicates_dropped']:,}")
    out.print(table)
    for s in report.sources:
        if s.note:
            out.print(f"{s.source}: {s.note}", markup=False)
        if s.reasons:
            out.print(
                f"{s.source}: quarantined " + ", ".join(f"{k} {v}" for k, v in s.reasons.items()),
                markup=False,
            )
    balanced = all(s.balanced for s in report.sources)
    out.print(
        "reconciliation: read = accepted + quarantined + duplicates dropped "
        + ("holds for every source" if balanced else "DOES NOT HOLD")
    )


@store_app.command("info")
def store_info_cmd(
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Records, systems, items, judges and crossing completeness per item set."""
    _run(_store_info, store, storage_option, config, as_json)


def _store_info(store, storage_option, config, as_json) -> None:
    from jurymeter.io.info import metadata_counts, quarantine_counts, store_info

    target = _open_store(store, storage_option, config)
    summary = store_info(target)
    quarantine = quarantine_counts(target)
    meta = metadata_counts(target)
    if as_json:
        payload = {
            "store": target.url,
            "item_sets": summary.to_dicts(),
            "metadata": meta,
            "quarantine": {r["reason"]: r["records"] for r in quarantine.to_dicts()},
        }
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    print_store_info(target.url, summary, quarantine, meta)


def print_store_info(url, summary, quarantine, meta) -> None:
    table = Table(title=f"store {url}", title_justify="left")
    for col in summary.columns:
        table.add_column(col, justify="left" if col in ("protocol", "item_set") else "right")
    for row in summary.iter_rows(named=True):
        table.add_row(*[
            f"{v:.3f}" if k == "completeness" else (f"{v:,}" if isinstance(v, int) else str(v))
            for k, v in row.items()
        ])
    out.print(table)
    out.print(f"metadata: {meta['systems']} systems, {meta['judges']} judges")
    if quarantine.height:
        out.print(
            "quarantine: "
            + ", ".join(f"{r['reason']} {r['records']:,}" for r in quarantine.to_dicts())
        )
    else:
        out.print("quarantine: empty")


@app.command()
def gstudy(
    item_set: Annotated[str, typer.Option("--item-set", help="Item set to fit")],
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    universe: Annotated[
        str | None, typer.Option("--universe", help="Judge universe named in the config file")
    ] = None,
    population: Annotated[
        str | None, typer.Option("--population", help="System population named in the config file")
    ] = None,
    generations: Annotated[
        str, typer.Option("--generations", help="'average' (default) or 'facet'")
    ] = "average",
    boot: Annotated[int, typer.Option("--boot", help="Parametric bootstrap resamples")] = 800,
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
    target: Annotated[float, typer.Option(help="Target E rho^2 for sizing")] = 0.8,
    interval: Annotated[
        str, typer.Option("--interval", help="'pivotal' (default) or 'percentile' (the paper's)")
    ] = "pivotal",
    as_json: Annotated[bool, typer.Option("--json", help="Print the full report as JSON")] = False,
    screen_threshold: Annotated[
        float, typer.Option("--screen-threshold", help="Keep items with between-system variance >= this")
    ] = 1.0,
    screened_out: Annotated[
        Path | None, typer.Option("--screened-out", help="Write the screened item ids here, one per line")
    ] = None,
) -> None:
    """G-study and D-study of one pointwise item set, with bootstrap intervals."""
    _run(_gstudy, item_set, store, storage_option, config, universe, population, generations,
         boot, seed, target, as_json, screen_threshold, screened_out, interval)


def _store_with_item_set(store, storage_option, config, item_set: str):
    """The store, checked readable and holding the pointwise item set asked for."""
    target_store = _open_store(store, storage_option, config)
    target_store.check()
    if item_set not in target_store.item_sets("pointwise"):
        known = ", ".join(target_store.item_sets("pointwise")) or "none"
        msg = f"no pointwise item set {item_set!r} in {target_store.url} (item sets: {known})"
        raise ConfigError(msg)
    return target_store


def _named_levels(settings: dict[str, Any], table: str, name: str | None) -> tuple[str, ...] | None:
    if name is None or name == "all":
        return None
    entries = settings.get(table, {})
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none"
        msg = f"no {table[:-1]} {name!r} in the config file (known: {known})"
        raise ConfigError(msg)
    values = entries[name]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        msg = f"{table}.{name} must be a list of ids"
        raise ConfigError(msg)
    return tuple(values)


def _gstudy(item_set, store, storage_option, config, universe, population, generations,
            boot, seed, target, as_json, screen_threshold=1.0, screened_out=None,
            interval="pivotal") -> None:
    from jurymeter.stats.reliability import GStudyRequest, assess_item_set

    settings = _load_config(config)
    target_store = _store_with_item_set(store, storage_option, config, item_set)
    request = GStudyRequest(
        item_set=item_set,
        judges=_named_levels(settings, "universes", universe),
        systems=_named_levels(settings, "populations", population),
        generations=generations,  # type: ignore[arg-type]
        n_boot=boot,
        seed=seed,
        target=target,
        screen_threshold=screen_threshold,
        interval_method=interval,
    )
    systems = target_store.scan("systems").collect()
    with err.status(f"fitting {item_set} and {boot} bootstrap resamples") if err.is_terminal else contextlib.nullcontext():
        report = assess_item_set(
            target_store.scan("pointwise", item_set), request, systems=systems if systems.height else None
        )
    report["universe"], report["population"] = universe or "all", population or "all"
    if screened_out is not None:
        kept = report["items"]["screened_items"] if report["items"] else []
        screened_out.write_text("".join(f"{item}\n" for item in kept))
    if as_json:
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
        return
    print_gstudy(report)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "never"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _fmt_bound(value: float) -> str:
    if value == float("inf"):
        return "never"
    return f"{value:.0f}" if float(value).is_integer() and abs(value) >= 2 else f"{value:.3f}"


def print_gstudy(report: dict[str, Any]) -> None:
    block = report["block"]
    out.print(
        f"item set {report['item_set']}  universe {report['universe']}  population "
        f"{report['population']}  design {report['design']}  "
        f"({block['systems']} systems x {block['items']} items x {block['judges']} judges x "
        f"{block['replicates']} replicates; completeness {block['completeness']:.3f})",
        markup=False,
    )
    for kind in ("systems", "items", "judges"):
        if block[f"dropped_{kind}"]:
            out.print(f"dropped {kind} to balance: {', '.join(block[f'dropped_{kind}'])}", markup=False)
    for note in block["notes"]:
        out.print(f"note: {note}", markup=False)
    table = Table(title="variance components", title_justify="left")
    for col in ("component", "raw", "share", "95% interval"):
        table.add_column(col, justify="left" if col == "component" else "right")
    for name, c in report["components"].items():
        i = c["interval"]
        table.add_row(name, f"{c['raw']:.4f}", f"{100 * c['share']:.1f}%", f"[{i['low']:.4f}, {i['high']:.4f}]")
    out.print(table)
    iv = report["intervals"]
    rows = [
        ("E rho^2 (native)", report["erho2"], iv["erho2"]),
        ("Phi (native)", report["phi"], iv["phi"]),
        ("single-judge ceiling", report["ceiling"], iv["ceiling"]),
        ("MDD95 (native)", report["mdd95"], iv["mdd95"]),
        ("MDD95 @30 items, 1 judge, 1 run", report["mdd95_30"], iv["mdd95_30"]),
        ("MDD95, unlimited items, 1 judge", report["mdd95_unlimited_items"], iv["mdd95_unlimited_items"]),
        ("MDD95 in SD of system means", report["mdd95_in_sd_of_system_means"], iv.get("mdd95_in_sd_of_system_means")),
        ("judges needed (30 items, 3 runs)", report["judges_needed"], iv["judges_needed"]),
        ("items needed (1 judge, 1 run)", report["items_needed"], iv["items_needed"]),
    ]
    d = Table(title="D-study", title_justify="left")
    for col in ("quantity", "estimate", "95% interval"):
        d.add_column(col, justify="left" if col == "quantity" else "right")
    for name, value, interval in rows:
        d.add_row(
            name, _fmt(value),
            f"[{_fmt_bound(interval['low'])}, {_fmt_bound(interval['high'])}]" if interval else "",
        )
    out.print(d)
    out.print(
        f"P(ceiling >= 0.8) = {report['p_ceiling_at_least_0_8']:.3f}; judges needed for "
        f"E rho^2 >= {report['target']} at 30 items, 3 runs: {_fmt(report['judges_needed'])}; "
        f"items needed at 1 judge, 1 run: {_fmt(report['items_needed'])}",
        markup=False,
    )
    for budget, best in report["budget_optimum"].items():
        out.print(
            f"budget {budget} calls: {best['n_i']} items x {best['n_j']} judges x {best['n_r']} runs "
            f"(MDD95 {best['mdd95']:.3f})"
        )
    naive = report["naive_item_bootstrap"]
    out.print(
        f"naive item bootstrap half-width {naive['halfwidth']:.3f} vs single-judge MDD95 "
        f"{naive['mdd95_single_judge']:.3f}: understates {_fmt(naive['mdd95_over_halfwidth'], 2)}x"
    )
    rank = report["rank_reliability"]
    out.print(
        f"adjacent top-10 pairs in the wrong order: {rank['wrong_order_top10_1_judge']:.3f} at 1 judge, "
        f"{rank['wrong_order_top10_3_judges']:.3f} at 3 judges; MDD rule false-positive rate "
        f"{_fmt(rank['mdd_false_positive_rate'])}"
    )
    for k, e in report["ensembles"].items():
        out.print(
            f"ensembles of {k}: observed/predicted sigma2_sj median {e['median']:.2f} "
            f"[{e['low']:.2f}, {e['high']:.2f}] over {e['partitions']} partitions"
        )
    nested = report.get("nested")
    if nested:
        share = nested["config_share_of_system_variance"]
        out.print(
            f"nested ({nested['design']}, {len(nested['models'])} models x "
            f"{nested['configs_per_model']} configs): sigma2_m {nested['sigma2_m']:.4f}, "
            f"sigma2_c:m {nested['sigma2_c_m']:.4f}, configuration share "
            f"{_fmt(None if share is None else 100 * share, 1)}%, ceiling with the model as object "
            f"{nested['ceiling_model_as_object']:.3f}"
        )
    if report["items"]:
        it = report["items"]
        out.print(
            f"item split-half Spearman {it['split_half_rho_median']:.3f} "
            f"[{it['split_half_rho_low']:.3f}, {it['split_half_rho_high']:.3f}]; "
            f"{len(it['screened_items'])} of {block['items']} items pass the screen "
            f"(between-system variance >= {it['screen_threshold']})"
        )


@app.command()
def cyclic(
    item_set: Annotated[str, typer.Option("--item-set", help="Item set to decompose")],
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    budgets: Annotated[
        str | None,
        typer.Option("--budgets", help="Per-scenario judge-call budgets, e.g. 5,10,20 (multiples of K)"),
    ] = None,
    at_generations: Annotated[int, typer.Option("--at-generations", help="Operating point m")] = 1,
    at_judges: Annotated[int, typer.Option("--at-judges", help="Operating point K")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """CyclicJudge: per-system judge offsets, F-test and allocation-strategy variances."""
    _run(_cyclic, item_set, store, storage_option, config, budgets, at_generations, at_judges, as_json)


def _int_list(text: str | None, what: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        msg = f"{what} expects integers separated by commas, got {text!r}"
        raise ConfigError(msg) from None


def _cyclic(item_set, store, storage_option, config, budgets, at_generations, at_judges, as_json) -> None:
    from jurymeter.cyclic.fit import cyclic_report

    target_store = _store_with_item_set(store, storage_option, config, item_set)
    report = cyclic_report(
        target_store.scan("pointwise", item_set),
        systems=target_store.scan("systems").collect(),
        judges=target_store.scan("judges").collect(),
        budgets=_int_list(budgets, "--budgets"),
        at_generations=at_generations,
        at_judges=at_judges,
    )
    report["item_set"] = item_set
    if as_json:
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
        return
    block = report["block"]
    out.print(
        f"item set {item_set}: {block['systems']} systems x {block['items']} scenarios x "
        f"{block['generations']} generations x {block['judges']} judges "
        f"(replicates averaged; completeness {block['completeness']:.3f})",
        markup=False,
    )
    table = Table(title="per-system decomposition", title_justify="left")
    for col in ("system", "sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual", "F", "p", "A vs B"):
        table.add_column(col, justify="left" if col in ("system", "A vs B") else "right")
    for system, r in report["systems"].items():
        table.add_row(
            system, f"{r['sigma2_scenario']:.4f}", f"{r['sigma2_generation']:.4f}",
            f"{r['sigma2_judge']:.4f}", f"{r['sigma2_residual']:.4f}", f"{r['f_statistic']:.2f}",
            f"{r['p_value']:.2g}", str(r["strategies"].get("winner_ab", "")),
        )
    out.print(table)
    offsets = report["judge_system_offsets"]
    judges = list(next(iter(offsets.values())).keys()) if offsets else []
    heat = Table(title="judge offsets by system (judge mean - panel mean)", title_justify="left")
    heat.add_column("system")
    for j in judges:
        heat.add_column(j, justify="right")
    for system, row in offsets.items():
        heat.add_row(system, *[f"{row[j]:+.3f}" for j in judges])
    out.print(heat)
    for p in report.get("self_preference", []):
        out.print(
            f"self-preference: {p['judge_id']} on {p['system_id']} ({p['family']}): offset "
            f"{p['offset']:+.3f}, on other families {p['other_offset']:+.3f}, excess {p['excess']:+.3f}",
            markup=False,
        )


@app.command()
def plan(
    out_path: Annotated[Path, typer.Option("--out", help="Assignment table: .csv, .jsonl or .parquet")],
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    item_set: Annotated[
        str | None, typer.Option("--item-set", help="Take items, systems and judges from this item set")
    ] = None,
    items: Annotated[Path | None, typer.Option("--items", help="File of item ids, one per line")] = None,
    systems: Annotated[Path | None, typer.Option("--systems", help="File of system ids")] = None,
    judges: Annotated[Path | None, typer.Option("--judges", help="File of judge ids")] = None,
    generations: Annotated[int, typer.Option("--generations", help="Generations per item")] = 1,
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
    prices: Annotated[
        list[str] | None,
        typer.Option("--price", help="JUDGE=PRICE per call; with --budget gives a cost-weighted plan"),
    ] = None,
    budget: Annotated[
        float | None, typer.Option("--budget", help="Money per system for the cost-weighted plan")
    ] = None,
    components: Annotated[
        str | None,
        typer.Option(
            "--components",
            help="sigma2 scenario,generation,judge,residual for the cost plan "
            "[default: fitted from --item-set]",
        ),
    ] = None,
) -> None:
    """Write a round-robin judge assignment (system, item, generation, judge) for the next run.

    With --price and --budget, the plan instead minimizes the predicted variance
    under the money budget, and its predicted variance is printed beside the
    uniform round robin's for the same money.
    """
    _run(_plan, out_path, store, storage_option, config, item_set, items, systems, judges,
         generations, seed, prices, budget, components)


def _ids_from_file(path: Path | None) -> list[str] | None:
    if path is None:
        return None
    try:
        ids = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        msg = f"file not found: {path}"
        raise ConfigError(msg) from None
    return ids


def _plan_components(components, item_set, store, storage_option, config):
    from jurymeter.cyclic import VarianceComponents

    if components is not None:
        try:
            values = [float(v) for v in components.split(",")]
            return VarianceComponents(*values)
        except (TypeError, ValueError, JurymeterError):
            msg = "--components expects four numbers >= 0: scenario,generation,judge,residual"
            raise ConfigError(msg) from None
    if item_set is None:
        msg = "a cost-weighted plan needs --components or an --item-set to fit them from"
        raise ConfigError(msg)
    from jurymeter.cyclic.fit import cyclic_report

    target_store = _open_store(store, storage_option, config)
    report = cyclic_report(target_store.scan("pointwise", item_set))
    names = ("sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual")
    means = [sum(r[n] for r in report["systems"].values()) / len(report["systems"]) for n in names]
    return VarianceComponents(*means)


def _plan(out_path, store, storage_option, config, item_set, items, systems, judges, generations, seed,
          prices=None, budget=None, components=None) -> None:
    import polars as pl

    from jurymeter.cyclic.planner import plan_cost_weighted, plan_round_robin

    found = {"items": _ids_from_file(items), "systems": _ids_from_file(systems), "judges": _ids_from_file(judges)}
    if any(v is None for v in found.values()):
        if item_set is None:
            msg = "give --item-set (to read ids from the store) or all of --items, --systems and --judges"
            raise ConfigError(msg)
        target_store = _open_store(store, storage_option, config)
        target_store.check()
        records = target_store.scan("pointwise", item_set, columns=["item_id", "system_id", "judge_id"]).collect()
        if not records.height:
            msg = f"no pointwise records for item set {item_set!r} in {target_store.url}"
            raise ConfigError(msg)
        for key, column in (("items", "item_id"), ("systems", "system_id"), ("judges", "judge_id")):
            if found[key] is None:
                found[key] = records[column].unique().sort().to_list()
    cost_note = None
    if prices:
        if budget is None:
            msg = "--price needs --budget (money per system)"
            raise ConfigError(msg)
        price_map = {k: float(v) for k, v in _pairs(prices, "--price").items()}
        cost = plan_cost_weighted(
            found["items"], found["systems"], found["judges"], prices=price_map, budget=budget,
            components=_plan_components(components, item_set, store, storage_option, config), seed=seed,
        )
        table = cost.plan
        cost_note = (
            f"cost-weighted plan: predicted variance {cost.variance:.6g} for {cost.cost:g} per system; "
            f"uniform round robin for the same money: {cost.uniform_variance:.6g} for {cost.uniform_cost:g}"
            + ("" if cost.optimal else " (allocation not proven optimal)")
        )
    else:
        table = plan_round_robin(
            found["items"], found["systems"], found["judges"], generations=generations, seed=seed
        )
    suffix = out_path.suffix.lower()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        table.write_csv(out_path)
    elif suffix in (".jsonl", ".ndjson"):
        table.write_ndjson(out_path)
    elif suffix == ".parquet":
        table.write_parquet(out_path)
    else:
        msg = f"--out must end in .csv, .jsonl or .parquet, got {out_path.name!r}"
        raise ConfigError(msg)
    calls = table.group_by("judge_id").agg(pl.len().alias("calls")).sort("judge_id")
    out.print(
        f"wrote {table.height:,} assignments to {out_path} ({len(found['systems'])} systems x "
        f"{len(found['items'])} items x {generations} generations); calls per judge: "
        + ", ".join(f"{r['judge_id']} {r['calls']:,}" for r in calls.to_dicts()),
        markup=False,
    )
    if cost_note:
        out.print(cost_note, markup=False)


@app.command()
def simulate(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write the dump into")],
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
    systems: Annotated[int | None, typer.Option(help="Number of systems")] = None,
    items: Annotated[int | None, typer.Option(help="Number of items")] = None,
    judges: Annotated[int | None, typer.Option(help="Number of judges")] = None,
    faults: Annotated[int, typer.Option(help="Bad records to inject (for the quarantine)")] = 0,
) -> None:
    """Write a seeded, realistic dump with its true parameters in truth.json."""
    _run(_simulate, out_dir, seed, systems, items, judges, faults)


def _simulate(out_dir, seed, systems, items, judges, faults) -> dict[str, Path]:
    import dataclasses

    from jurymeter.simulate import SimulationParams, simulate_dump, write_dump

    changes: dict[str, Any] = {"seed": seed}
    for name, value in (("n_systems", systems), ("n_items", items), ("n_judges", judges)):
        if value is not None:
            changes[name] = value
    if systems is not None:
        # The default number of judged pairs cannot exceed the pairs that exist.
        changes["pairwise_pairs"] = min(SimulationParams().pairwise_pairs or 0, systems * (systems - 1) // 2)
    try:
        params = dataclasses.replace(SimulationParams(), **changes)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    dump = simulate_dump(params)
    paths = write_dump(dump, out_dir, faults=faults, seed=seed)
    for name, path in paths.items():
        out.print(f"wrote {name}: {path}", markup=False)
    return paths


@app.command()
def run(
    config: ConfigOpt = None,
    store: StoreOpt = None,
    landing: Annotated[
        str | None, typer.Option("--landing", help="Folder or s3:// prefix where new dumps land")
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", help="Dask scheduler address [default: $DASK_SCHEDULER_ADDRESS or a LocalCluster]"),
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="LocalCluster worker processes [default: 2]")
    ] = None,
    n_boot: Annotated[int | None, typer.Option("--boot", help="Bootstrap resamples per fit")] = None,
    force: Annotated[bool, typer.Option("--force", help="Refit even when inputs are unchanged")] = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the HTML report")] = False,
    home: Annotated[
        str | None, typer.Option("--home", help="Run state folder (Prefect's database and logs) [default: .jurymeter]")
    ] = None,
) -> None:
    """The nightly flow: ingest what landed, fit every item set on Dask, publish results and report."""
    overrides = {
        "store": store, "landing": landing, "dask.address": scheduler, "dask.workers": workers,
        "fit.n_boot": n_boot, "home": home, "report": False if no_report else None,
    }
    summary = _run(_run_flow, config, overrides, force)
    if summary["status"] != "complete":
        # The results are published; the status tells a scheduler that some fits failed.
        raise typer.Exit(4)


def _run_flow(config_path: Path | None, overrides: dict[str, Any], force: bool) -> dict[str, Any]:
    from jurymeter.pipeline.config import load_config

    settings = load_config(config_path, overrides=overrides)  # fail fast, before Prefect starts
    from jurymeter.orchestration.runtime import run_environment

    out.print(f"store {settings.store}, landing {settings.landing or '(none)'}", markup=False)
    dask = settings.dask

    def ingest_meanwhile() -> None:  # the ingest needs neither the Prefect server nor Dask
        from jurymeter.orchestration.flow import start_ingest_early

        start_ingest_early(settings)

    with run_environment(
        settings.home, dask.address, dask.workers, dask.threads_per_worker,
        imports=("jurymeter.orchestration.flow", "jurymeter.io.ingest"), meanwhile=ingest_meanwhile,
    ) as address:
        from jurymeter.orchestration.flow import listening, nightly

        overrides = {**overrides, "dask.address": address}

        progress = _progress("fits")

        def on_fit(outcome: Any) -> None:
            progress.advance(task_id)
            if outcome.status == "failed":
                err.print(f"fit failed: {outcome.job.name}: {outcome.error}", markup=False)

        with progress, listening(on_fit):
            task_id = progress.add_task("fits", total=None)
            summary = nightly(str(config_path) if config_path else None, force, overrides)
    print_run_summary(summary)
    return summary


def print_run_summary(summary: dict[str, Any]) -> None:
    ingest = summary.get("ingest")
    if ingest:
        t = ingest["totals"]
        out.print(
            f"ingest: read {t['read']:,} = accepted {t['accepted']:,} + quarantined "
            f"{t['quarantined']:,} + duplicates dropped {t['duplicates_dropped']:,}",
            markup=False,
        )
    else:
        out.print("ingest: nothing new in the landing location", markup=False)
    counts: dict[str, int] = {}
    for fit in summary["fits"]:
        counts[fit["status"]] = counts.get(fit["status"], 0) + 1
    table = Table(title=f"run {summary['run_id']}: {summary['status']}", title_justify="left")
    for col in ("item set", "universe", "population", "status", "E rho2", "MDD95", "ceiling"):
        table.add_column(col, justify="left" if col in ("item set", "universe", "population", "status") else "right")
    for fit in summary["fits"]:
        table.add_row(
            fit["item_set"], fit["universe"], fit["population"],
            fit["status"] if fit["status"] != "failed" else f"failed: {fit['error']}",
            *(_fmt(fit[k]) if k in fit else "-" for k in ("erho2", "mdd95", "ceiling")),
        )
    out.print(table)
    if not summary["fits"]:
        out.print(
            "no fits: the store holds no pointwise item set yet "
            f"(drop judgment dumps into {summary.get('landing') or 'a landing folder'} and run again)",
            markup=False,
        )
    out.print(
        (", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "0 fits")
        + f"; timings {summary['timings']}",
        markup=False,
    )
    folder = summary["store"].rstrip("/") + f"/results/{summary['run_id']}"
    if "report" in summary["timings"]:
        out.print(f"report: {folder}/report/index.html", markup=False)
    out.print(f"results: {folder}/ (summary.json and tables)", markup=False)


@app.command()
def report(
    results: Annotated[str, typer.Argument(help="A run folder (results/<run_id>) or 'latest'")] = "latest",
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Rebuild the HTML report of a run from its results folder."""
    _run(_report, results, store, storage_option, config)


def _report(results: str, store, storage_option, config) -> str:
    from jurymeter.pipeline.nightly import read_run, write_report

    target = _open_store(store, storage_option, config)
    target.check()
    if results == "latest":
        try:
            latest = target.read_json("results/latest.json")
        except FileNotFoundError as exc:
            msg = f"no run in {target.url} yet (results/latest.json is missing)"
            raise ConfigError(msg) from exc
        folder = f"results/{latest['run_id']}"
    else:
        folder = results.rstrip("/")
        if folder.startswith(target.root + "/"):
            folder = folder[len(target.root) + 1 :]
        if not folder.startswith("results/"):
            folder = f"results/{folder}"
    try:
        tables, summary = read_run(target, folder)
    except FileNotFoundError as exc:
        msg = f"not a complete run folder: {target.path(folder)} (no summary.json or tables)"
        raise ConfigError(msg) from exc
    page = write_report(target, folder, tables, summary)
    out.print(f"report: {page}", markup=False)
    return page


@app.command()
def demo(
    workdir: Annotated[
        Path, typer.Option("--workdir", help="Where the dump, the store and the report go")
    ] = Path("jurymeter-demo"),
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
) -> None:
    """The main job on the embedded default: simulate a dump into a landing folder, run the nightly flow."""
    _run(_demo, workdir, seed)


DEMO_CONFIG = """\
# Written by `jurymeter demo`: a nightly run over a simulated dump.
store = "{store}"
landing = "{landing}"
home = "{home}"
scale = [1, 10]

[universes]
three-judges = ["judge-a", "judge-b", "judge-c"]

[fit]
universes = ["all", "three-judges"]
n_boot = 800
"""


def _demo(workdir: Path, seed: int) -> None:
    workdir = workdir.resolve()
    landing = workdir / "landing"
    _simulate(landing, seed, None, None, None, 12)
    config_path = workdir / "jurymeter.toml"
    config_path.write_text(
        DEMO_CONFIG.format(store=workdir / "store", landing=landing, home=workdir / ".jurymeter")
    )
    out.print(f"config: {config_path}", markup=False)
    _run_flow(config_path, {}, False)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
