"""Commands that plan the next judging or make data: ``plan``, ``batch-plan`` and ``simulate`` (no fit of their own but ``plan``'s components)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jurymeter.cli.common import (
    ConfigOpt,
    StorageOpt,
    StoreOpt,
    ids_from_file,
    open_store,
    pairs,
    run_command,
    write_table,
)
from jurymeter.errors import ConfigError, JurymeterError
from jurymeter.render.text import out, safe_text

if TYPE_CHECKING:

    from jurymeter.stats.cyclic import VarianceComponents


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
    run_command(_plan, out_path, store, storage_option, config, item_set, items, systems, judges,
         generations, seed, prices, budget, components)



def _plan_components(components: str | None, item_set: str | None, store: str | None,
                     storage_option: list[str] | None, config: Path | None) -> VarianceComponents:
    """The cost plan's components: ``--components``, or CyclicJudge's on ``--item-set`` averaged over its systems."""
    from jurymeter.stats.cyclic import VarianceComponents

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
    from jurymeter.cli.analyses import fit_report
    from jurymeter.cli.common import run_config
    from jurymeter.stats.cyclic.fit import mean_components

    # CyclicJudge on the item set through the nightly run's fit path (the store checked,
    # [fit.cyclic] read); the average over its systems is the library's.
    _, report = fit_report(run_config(config, store, storage_option), "cyclic", item_set, title="CyclicJudge")
    return mean_components(report)


def _plan(out_path: Path, store: str | None, storage_option: list[str] | None, config: Path | None, item_set: str | None, items: Path | None, systems: Path | None, judges: Path | None, generations: int, seed: int,
          prices: list[str] | None = None, budget: float | None = None, components: str | None = None) -> None:
    import polars as pl

    from jurymeter.stats.cyclic.planner import plan_cost_weighted, plan_round_robin

    found = {"items": ids_from_file(items), "systems": ids_from_file(systems), "judges": ids_from_file(judges)}
    if any(v is None for v in found.values()):
        if item_set is None:
            msg = "give --item-set (to read ids from the store) or all of --items, --systems and --judges"
            raise ConfigError(msg)
        target_store = open_store(store, storage_option, config)
        target_store.check()
        records = target_store.scan("pointwise", item_set, columns=["item_id", "system_id", "judge_id"]).collect()
        if not records.height:
            msg = f"no pointwise records for item set {item_set!r} in {target_store.url}"
            raise ConfigError(msg)
        for key, column in (("items", "item_id"), ("systems", "system_id"), ("judges", "judge_id")):
            if found[key] is None:
                found[key] = records[column].unique().sort().to_list()
    ids = {k: v for k, v in found.items() if v is not None}  # all three, from the files or the store
    cost_note = None
    if prices:
        if budget is None:
            msg = "--price needs --budget (money per system)"
            raise ConfigError(msg)
        try:
            price_map = {k: float(v) for k, v in pairs(prices, "--price").items()}
        except ValueError:
            msg = "--price expects JUDGE=PRICE with a number for PRICE"
            raise ConfigError(msg) from None
        cost = plan_cost_weighted(
            ids["items"], ids["systems"], ids["judges"], prices=price_map, budget=budget,
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
            ids["items"], ids["systems"], ids["judges"], generations=generations, seed=seed
        )
    write_table(table, out_path)
    calls = table.group_by("judge_id").agg(pl.len().alias("calls")).sort("judge_id")
    out.print(
        f"wrote {table.height:,} assignments to {safe_text(out_path)} ({len(ids['systems'])} systems x "
        f"{len(ids['items'])} items x {generations} generations); calls per judge: "
        + ", ".join(f"{safe_text(r['judge_id'])} {r['calls']:,}" for r in calls.to_dicts()),
        markup=False,
    )
    if cost_note:
        out.print(cost_note, markup=False)


def simulate(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write the dump into")],
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
    systems: Annotated[int | None, typer.Option(help="Number of systems")] = None,
    items: Annotated[int | None, typer.Option(help="Number of items")] = None,
    judges: Annotated[int | None, typer.Option(help="Number of judges")] = None,
    faults: Annotated[int, typer.Option(help="Bad records to inject (for the quarantine)")] = 0,
) -> None:
    """Write a seeded, realistic dump with its true parameters in truth.json."""
    run_command(simulate_dump_to, out_dir, seed, systems, items, judges, faults)


def simulate_dump_to(out_dir: Path, seed: int, systems: int | None, items: int | None, judges: int | None,
                     faults: int) -> dict[str, Path]:
    """Simulate a dump (``--systems``, ``--items``, ``--judges`` over the defaults) into ``out_dir``; its files."""
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
        out.print(f"wrote {name}: {safe_text(path)}", markup=False)
    return paths


def batch_plan_command(
    out_path: Annotated[Path, typer.Option("--out", help="Assignment table: .csv, .jsonl or .parquet")],
    items: Annotated[Path, typer.Option("--items", help="File of the rated units' ids, one per line")],
    judges: Annotated[Path, typer.Option("--judges", help="File of judge ids, one per line")],
    batches: Annotated[int, typer.Option("--batches", help="Batches in all (over every judge)")],
    design: Annotated[str, typer.Option("--design", help="'williams' (default) or 'random'")] = "williams",
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
) -> None:
    """Write a batch plan (batch_id, batch_position, item_id, judge_id): Williams-square or randomized orders."""
    run_command(_batch_plan, out_path, items, judges, batches, design, seed)


def _batch_plan(out_path: Path, items: Path, judges: Path, batches: int, design: str, seed: int) -> None:
    from jurymeter.stats.sequential.plans import batch_plan

    item_ids, judge_ids = ids_from_file(items) or [], ids_from_file(judges) or []
    table = batch_plan(item_ids, batches, judge_ids, design=design, seed=seed)  # type: ignore[arg-type]
    write_table(table, out_path)
    out.print(f"wrote {table.height:,} ratings in {batches:,} batches of {len(item_ids)} to {safe_text(out_path)} "
              f"({design} orders, seed {seed}; judges in turn: {', '.join(map(safe_text, judge_ids))})", markup=False)
