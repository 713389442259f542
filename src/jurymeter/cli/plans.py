"""Commands that plan the next judging or make data: ``plan``, ``batch-plan`` and ``simulate`` (no fit of their own but ``plan``'s components)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jurymeter.cli.common import (
    ConfigOpt,
    PopulationOpt,
    StorageOpt,
    StoreOpt,
    UniverseOpt,
    ids_from_file,
    pairs,
    run_command,
    write_table,
)
from jurymeter.errors import ConfigError, JurymeterError
from jurymeter.render.text import out, safe_text

if TYPE_CHECKING:
    from jurymeter.io.store import Store
    from jurymeter.pipeline.config import RunConfig
    from jurymeter.stats.cyclic import VarianceComponents


def plan(
    out_path: Annotated[Path, typer.Option("--out", help="Assignment table: .csv, .jsonl or .parquet")],
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    item_set: Annotated[
        list[str] | None,
        typer.Option("--item-set", help="Take items, systems and judges from this item set (repeat it to plan "
                     "several: --out is then a folder of one table per item set)"),
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
    crossed: Annotated[
        bool, typer.Option("--crossed", help="Every judge scores every system on every item (the D-study's design)")
    ] = False,
    plan_id: Annotated[
        str | None, typer.Option("--plan-id", help="Name of the stored plan [default: plan-<UTC time>]")
    ] = None,
    next_item_set: Annotated[
        str | None,
        typer.Option("--next-item-set", help="Item set the planned judgments are ingested into "
                     "[default: <item set>-<plan id>]"),
    ] = None,
    target_mdd: Annotated[
        float | None, typer.Option("--target-mdd", help="Size the crossed plan: the fewest calls reaching MDD95 <= X")
    ] = None,
    target_erho2: Annotated[
        float | None,
        typer.Option("--target-erho2", help="Size the crossed plan: the fewest calls reaching E rho^2 >= Y"),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option("--batch-size", help="Crossed plan in batches of about V items per judge and system, "
                     "Williams-ordered (batch_id, batch_position)"),
    ] = None,
    universe: UniverseOpt = None,
    population: PopulationOpt = None,
) -> None:
    """Write a round-robin judge assignment (system, item, generation, judge) for the next run.

    With --price and --budget, the plan instead minimizes the predicted variance
    under the money budget, and its predicted variance is printed beside the
    uniform round robin's for the same money. With --crossed every judge scores
    every cell. With --item-set the plan is also stored in the store with its
    predictions (MDD95 and E rho^2 with 95% prediction intervals, from the item
    set's G-study; a round-robin or cost-weighted plan: each allocation strategy's
    variance with a 95% interval, from the item set's CyclicJudge fit); the run that fits
    the planned judgments, ingested into --next-item-set, compares what it measures with them. --target-mdd or
    --target-erho2 sizes the crossed plan: the fewest judge calls (items x
    judges, within the item set's) whose D-study reaches the target. --universe and
    --population (names of the configuration) take the judges and systems, and
    tonight's G-study, of that judge universe and system population.
    --batch-size V orders a crossed plan in batches (each judge rates a system's
    items V at a time, Williams orders balancing position and carry-over).
    """
    run_command(_plans, out_path, store, storage_option, config, item_set or [], items=items, systems=systems,
                judges=judges, generations=generations, seed=seed, prices=prices, budget=budget,
                components=components, crossed=crossed, plan_id=plan_id, next_item_set=next_item_set,
                target_mdd=target_mdd, target_erho2=target_erho2, universe=universe or "all",
                population=population or "all", batch_size=batch_size)


def _plans(out_path: Path, store: str | None, storage_option: list[str] | None, config: Path | None,
           item_sets: list[str], **options: Any) -> None:
    """One plan, or one per ``--item-set`` (each written into the folder ``--out`` as ``<item set>.csv``).

    Several item sets share one store and configuration; each gets its own default plan id and next item set
    (``--plan-id`` and ``--next-item-set`` name one plan, so they are refused with several).
    """
    if len(item_sets) <= 1:
        _plan(out_path, store, storage_option, config, item_sets[0] if item_sets else None, **options)
        return
    from jurymeter.io.naming import item_set_folder

    if options["plan_id"] is not None or options["next_item_set"] is not None:
        msg = "--plan-id and --next-item-set name one plan: give one --item-set with them, or neither"
        raise ConfigError(msg)
    twice = sorted({i for i in item_sets if item_sets.count(i) > 1})
    if twice:
        msg = f"--item-set names an item set twice: {', '.join(twice)}"
        raise ConfigError(msg)
    if out_path.exists() and not out_path.is_dir():
        msg = f"--out {out_path}: with several --item-set it is a folder (one table per item set), and this is a file"
        raise ConfigError(msg)
    out_path.mkdir(parents=True, exist_ok=True)
    for item_set in item_sets:
        _plan(out_path / f"{item_set_folder(item_set)}.csv", store, storage_option, config, item_set, **options)



def _plan_components(components: str | None, item_set: str | None, store: str | None,
                     storage_option: list[str] | None, config: Path | None,
                     tonight: _Tonight | None = None) -> VarianceComponents:
    """The cost plan's components: ``--components``, or CyclicJudge's on ``--item-set`` averaged over its systems
    (``tonight``: that report, already read or fitted, or why there is none)."""
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
    from jurymeter.errors import DesignError
    from jurymeter.stats.cyclic.fit import mean_components

    if tonight is not None:
        report, _, why = tonight
        if report is None:
            raise DesignError(str(why))
        return mean_components(report)
    # CyclicJudge on the item set through the nightly run's fit path (the store checked,
    # [fit.cyclic] read); the average over its systems is the library's.
    _, report = fit_report(run_config(config, store, storage_option), "cyclic", item_set, title="CyclicJudge")
    return mean_components(report)


def _plan(out_path: Path, store: str | None, storage_option: list[str] | None, config: Path | None, item_set: str | None, items: Path | None, systems: Path | None, judges: Path | None, generations: int, seed: int,
          prices: list[str] | None = None, budget: float | None = None, components: str | None = None,
          crossed: bool = False, plan_id: str | None = None, next_item_set: str | None = None,
          target_mdd: float | None = None, target_erho2: float | None = None, universe: str = "all",
          population: str = "all", batch_size: int | None = None) -> None:
    import polars as pl

    from jurymeter.cli.common import run_config
    from jurymeter.io.store import Store
    from jurymeter.pipeline.jobs import named_levels
    from jurymeter.pipeline.plans import check_plan_id, free_plan_id
    from jurymeter.stats.cyclic.planner import plan_cost_weighted, plan_crossed, plan_round_robin

    targeted = target_mdd is not None or target_erho2 is not None
    if target_mdd is not None and target_erho2 is not None:
        msg = "give one of --target-mdd and --target-erho2"
        raise ConfigError(msg)
    if targeted and item_set is None:
        msg = "--target-mdd and --target-erho2 size the plan from a G-study: give the --item-set it is fitted on"
        raise ConfigError(msg)
    if target_mdd is not None and not (math.isfinite(target_mdd) and target_mdd > 0):
        msg = f"--target-mdd must be a positive number of score points, got {target_mdd!r}"
        raise ConfigError(msg)
    if target_erho2 is not None and not 0 < target_erho2 < 1:
        msg = f"--target-erho2 must be between 0 and 1 (exclusive), got {target_erho2!r}"
        raise ConfigError(msg)
    crossed = crossed or targeted  # a target sizes the crossed design the D-study describes
    if batch_size is not None and (not crossed or batch_size < 2):
        msg = (f"--batch-size must be at least 2, got {batch_size}" if batch_size < 2 else
               "--batch-size orders a judge's items for a system in batches, which needs every batch to hold the "
               "same items: add --crossed")
        raise ConfigError(msg)
    if crossed and prices and not targeted:
        msg = ("--crossed gives every judge every cell; --price and --budget choose a share of the calls: use one "
               "(or give --price with --target-mdd or --target-erho2: the cheapest crossed plan in money)")
        raise ConfigError(msg)
    if targeted and budget is not None:
        msg = "--budget sizes the cost-weighted plan; a target sizes the crossed plan by its least cost: use one"
        raise ConfigError(msg)
    if item_set is None and (plan_id is not None or next_item_set is not None):
        msg = "--plan-id and --next-item-set name a stored plan, which needs the --item-set it is drawn from"
        raise ConfigError(msg)
    if item_set is None and (universe, population) != ("all", "all"):
        msg = "--universe and --population choose the judges, systems and G-study of an --item-set: give it"
        raise ConfigError(msg)
    if plan_id is not None:
        check_plan_id(plan_id)  # before anything is read or written
    if next_item_set is not None and not next_item_set.strip():
        msg = "--next-item-set must name the item set the planned judgments go into, got an empty name"
        raise ConfigError(msg)

    # The configuration and store of an --item-set, resolved once: the ids, tonight's G-study and the plan use them.
    settings = run_config(config, store, storage_option) if item_set is not None else None
    plan_store = Store(settings.store, settings.storage_options) if settings is not None else None
    scope = named_levels(settings, universe, population) if settings is not None else {}
    found = {"items": ids_from_file(items), "systems": ids_from_file(systems), "judges": ids_from_file(judges)}
    if any(v is None for v in found.values()):
        if item_set is None or plan_store is None:
            msg = "give --item-set (to read ids from the store) or all of --items, --systems and --judges"
            raise ConfigError(msg)
        target_store = plan_store
        target_store.check()
        scan = target_store.scan("pointwise", item_set, columns=["item_id", "system_id", "judge_id"])
        for column, levels in scope.items():  # the judge universe's judges, the population's systems
            scan = scan.filter(pl.col(column).is_in(list(levels)))
        records = scan.collect()
        if not records.height:
            msg = (f"no pointwise records for item set {item_set!r} in {target_store.url}"
                   + (f" in universe {universe!r} and population {population!r}" if scope else ""))
            raise ConfigError(msg)
        for key, column in (("items", "item_id"), ("systems", "system_id"), ("judges", "judge_id")):
            if found[key] is None:
                found[key] = records[column].unique().sort().to_list()
    ids = {k: v for k, v in found.items() if v is not None}  # all three, from the files or the store
    cost_note = None
    tonight: _Tonight | None = None
    # Tonight's CyclicJudge report: the strategy variances of a round-robin or cost-weighted plan.
    cyclic = (_tonight_report(settings, plan_store, item_set, universe, population, "cyclic", "CyclicJudge")
              if not crossed and item_set is not None and settings is not None and plan_store is not None else None)
    strategy_budget: tuple[int, list[int] | None] = (generations, None)  # calls per item, per judge
    if prices and not targeted:
        if budget is None:
            msg = "--price needs --budget (money per system)"
            raise ConfigError(msg)
        price_map = _price_map(prices)
        cost = plan_cost_weighted(
            ids["items"], ids["systems"], ids["judges"], prices=price_map, budget=budget,
            components=_plan_components(components, item_set, store, storage_option, config,
                                        cyclic if components is None else None), seed=seed,
        )
        table = cost.plan
        per_judge = [int(cost.calls_per_item[j]) for j in ids["judges"]]
        strategy_budget = (sum(per_judge), per_judge)
        cost_note = (
            f"cost-weighted plan: predicted variance {cost.variance:.6g} for {cost.cost:g} per system; "
            f"uniform round robin for the same money: {cost.uniform_variance:.6g} for {cost.uniform_cost:g}"
            + ("" if cost.optimal else " (allocation not proven optimal)")
        )
    elif crossed:
        tonight = (_tonight_gstudy(settings, plan_store, item_set, universe, population)
                   if item_set is not None and settings is not None and plan_store is not None else None)
        if tonight is not None and targeted:  # (a target needs --item-set: checked above)
            ids, cost_note = _sized(ids, tonight, target_mdd, target_erho2, seed, _prices(prices, ids["judges"]))
        table = plan_crossed(ids["items"], ids["systems"], ids["judges"], generations=generations)
        if batch_size is not None:
            from jurymeter.stats.sequential.plans import batched_plan

            table = batched_plan(table, batch_size, seed=seed)
    else:
        table = plan_round_robin(
            ids["items"], ids["systems"], ids["judges"], generations=generations, seed=seed
        )
    the_plan_id = free_plan_id(plan_store, plan_id) if plan_store is not None else ""
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
    if batch_size is not None:
        out.print(f"in {table['batch_id'].n_unique():,} batches of about {batch_size} items (Williams orders: "
                  "each item at each position and after each other item equally often over a judge's full "
                  "cycles); ingest the judgments with their batch_id and batch_position", markup=False)
    if item_set is not None and plan_store is not None:
        kind = "cost_weighted" if prices and not crossed else "crossed" if crossed else "round_robin"
        counts = {k: len(ids[k]) for k in ("systems", "items", "judges")}
        _store_plan(table, plan_store, {"item_set": item_set, "universe": universe, "population": population},
                    the_plan_id, next_item_set or f"{item_set}-{the_plan_id}", kind, counts, generations, seed,
                    tonight, None if batch_size is None else {"size": batch_size, "design": "williams",
                                                              "batches": table["batch_id"].n_unique()},
                    cyclic, strategy_budget)



# Tonight's G-study of the item set: its report and where it came from, or why there is none.
_Tonight = tuple[dict[str, Any] | None, str, str | None]


def _tonight_gstudy(settings: RunConfig, plan_store: Store, item_set: str, universe: str = "all",
                    population: str = "all") -> _Tonight:
    """The item set's G-study as the run last fitted these records (the fit cache), else fitted now."""
    return _tonight_report(settings, plan_store, item_set, universe, population, "gstudy",
                           "the G-study the plan predicts from")


def _tonight_report(settings: RunConfig, plan_store: Store, item_set: str, universe: str, population: str,
                    analysis: str, title: str) -> _Tonight:
    """One analysis's report of the item set as the run last fitted these records (the fit cache), else fitted now."""
    from jurymeter.cli.analyses import fit_report
    from jurymeter.pipeline.cache import cached_report

    report = cached_report(plan_store, settings, item_set, analysis, universe=universe, population=population)
    if report is not None:
        return report, "the run's fit (cache)", None
    try:
        _, report = fit_report(settings, analysis, item_set, universe, population, title=title)
    except JurymeterError as exc:  # the plan is still worth storing: its predictions say why they are missing
        return None, "fitted by plan", str(exc)
    return report, "fitted by plan", None


def _price_map(prices: list[str]) -> dict[str, float]:
    """``--price JUDGE=PRICE`` as numbers by judge."""
    try:
        return {k: float(v) for k, v in pairs(prices, "--price").items()}
    except ValueError:
        msg = "--price expects JUDGE=PRICE with a number for PRICE"
        raise ConfigError(msg) from None


def _prices(prices: list[str] | None, judges: list[str]) -> dict[str, float] | None:
    """``--price JUDGE=PRICE`` for every candidate judge (a target's least-cost plan), or ``None`` without prices."""
    if not prices:
        return None
    given = _price_map(prices)
    unknown = sorted(set(given) - set(judges))
    missing = [j for j in judges if j not in given]
    if unknown or missing:
        msg = ("--price must give a price for each of the item set's judges (" + ", ".join(judges) + ")"
               + (f"; no judge {', '.join(unknown)}" if unknown else "")
               + (f"; missing {', '.join(missing)}" if missing else ""))
        raise ConfigError(msg)
    bad = [j for j, p in given.items() if not (math.isfinite(p) and p >= 0)]
    if bad:
        msg = f"--price must be a number >= 0; got {', '.join(f'{j}={given[j]!r}' for j in bad)}"
        raise ConfigError(msg)
    return given


def _sized(ids: dict[str, list[str]], tonight: _Tonight, target_mdd: float | None, target_erho2: float | None,
           seed: int, prices: dict[str, float] | None = None) -> tuple[dict[str, list[str]], str | None]:
    """The ids of the cheapest crossed design reaching the target (a seeded sample of the items; the first judges,
    or with prices the cheapest), and the plan's cost per system when priced."""
    import numpy as np

    from jurymeter.analyses.gstudy.plan import cheapest_sizes

    report, _, why = tonight
    if report is None:
        msg = f"--target-mdd/--target-erho2 need the item set's G-study: {why}"
        raise ConfigError(msg)
    judges = ids["judges"] if prices is None else sorted(ids["judges"], key=lambda j: (prices[j], j))
    sized = cheapest_sizes(report, max_items=len(ids["items"]), max_judges=len(judges),
                           target_mdd=target_mdd, target_erho2=target_erho2,
                           prices=None if prices is None else [prices[j] for j in judges])
    if isinstance(sized, str):
        raise ConfigError(sized)
    n_items, n_judges = sized
    order = np.random.default_rng(seed).permutation(len(ids["items"]))[:n_items]
    chosen = judges[:n_judges]
    note = None if prices is None else (
        f"least-cost plan reaching the target: {n_items} items x {n_judges} judges ({', '.join(chosen)}), "
        f"{n_items * sum(prices[j] for j in chosen):g} per system")
    return {**ids, "items": sorted(ids["items"][k] for k in order), "judges": chosen}, note


def _store_plan(table: Any, plan_store: Store, source: dict[str, str], plan_id: str, target: str, kind: str,
                counts: dict[str, int], generations: int, seed: int, tonight: _Tonight | None,
                batches: dict[str, Any] | None = None, cyclic: _Tonight | None = None,
                strategy_budget: tuple[int, list[int] | None] | None = None) -> None:
    """Predict the planned run from the item set's G-study (a round-robin or cost-weighted plan: its strategy
    variances from the item set's CyclicJudge report), store the plan, and print the predictions."""
    from jurymeter.analyses.cyclic.plan import strategy_predictions
    from jurymeter.analyses.gstudy.plan import plan_predictions
    from jurymeter.pipeline.plans import COMPARED, STRATEGY_NAMES, plan_record, store_plan
    from jurymeter.stats.plan_prediction import PREDICTED, Predicted

    report, fit, why = tonight if tonight is not None else (None, "none", None)
    predictions: dict[str, Predicted | None]
    if why is not None:
        predictions, reasons = {k: None for k in PREDICTED}, {k: why for k in PREDICTED}
    else:
        predictions, reasons = plan_predictions(report or {}, counts, crossed=kind == "crossed", seed=seed)
    strategies: dict[str, Predicted | None] = {}
    cyclic_fit = None
    if kind in ("round_robin", "cost_weighted") and strategy_budget is not None:
        cyclic_report, cyclic_fit, cyclic_why = cyclic if cyclic is not None else (None, "none", None)
        calls, per_judge = strategy_budget
        strategies, strategy_reasons = strategy_predictions(cyclic_report, counts, budget=calls,
                                                            calls_per_judge=per_judge, why=cyclic_why, seed=seed)
        predictions = {**predictions, **strategies}
        reasons = {**reasons, **strategy_reasons}
    record = plan_record(plan_id, source={**source, "fit": fit, **({} if cyclic_fit is None else
                                                                  {"cyclic_fit": cyclic_fit})},
                         item_set=target, kind=kind, counts=counts, generations=generations,
                         predictions=predictions, null_reasons=reasons, batches=batches)
    folder = store_plan(plan_store, record, table)
    out.print(f"stored plan {safe_text(plan_id)} in {safe_text(folder)}; ingest its judgments with "
              f"--item-set {safe_text(target)} and the next run measures it"
              + ("" if tonight is None or why is not None else " (predicted from a G-study fitted now: no run has "
                 "fitted these records)" if fit == "fitted by plan" else " (predicted from the run's G-study of "
                 "these records)"),
              markup=False)
    for key, name in COMPARED.items():
        p = predictions.get(key)
        if p is None or p.low is None:
            out.print(f"  {name}: not predicted: {safe_text(reasons.get(key, 'no interval'))}", markup=False)
        else:
            point = "n/a" if p.point is None else f"{p.point:.3g}"
            out.print(f"  predicted {name} {point} [{p.low:.3g}, {p.high:.3g}] (95% prediction interval: "
                      "tonight's uncertainty and the next run's sampling)", markup=False)
    for key in strategies:
        p = strategies[key]
        name = STRATEGY_NAMES[key]
        if p is None or p.low is None or p.point is None:
            out.print(f"  {name}: not predicted: {safe_text(reasons.get(key, 'no interval'))}", markup=False)
        else:
            out.print(f"  predicted {name} {p.point:.3g} [{p.low:.3g}, {p.high:.3g}] (per system, scenario term "
                      "excluded; 95% interval: tonight's CyclicJudge uncertainty)", markup=False)


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
