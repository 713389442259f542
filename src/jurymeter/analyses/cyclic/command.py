"""The ``jurymeter cyclic`` command, as data: CyclicJudge's options as flags, and its printout.

The CLI builds the typer command from :data:`COMMAND` (the one fit path:
:func:`jurymeter.pipeline.jobs.command_job`); no statistics here.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from jurymeter.analyses.commands import Command, Flag, Rule
from jurymeter.errors import ConfigError
from jurymeter.render.text import out, safe_text


def budgets_of(text: str) -> tuple[int, ...] | None:
    """``--budgets 5,10,20`` as integers (empty: the paper's default multiples of K)."""
    try:
        values = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        msg = f"--budgets expects integers separated by commas, got {text!r}"
        raise ConfigError(msg) from None
    return values or None


def print_cyclic(report: dict[str, Any]) -> None:
    """Per-system decompositions, the judge offsets by system and self-preference, for a terminal."""
    block, own = report["block"], report["system_blocks"]
    out.print(
        f"item set {safe_text(report['item_set'])}: {len(own)} systems decomposed, each on its own complete block of "
        f"scenarios x generations x the panel's {block['judges']} judges (replicates averaged)",
        markup=False,
    )
    for system, why in (report.get("skipped_systems") or {}).items():
        out.print(f"not decomposed: {safe_text(system)}: {safe_text(why)}", markup=False)
    table = Table(title="per-system decomposition", title_justify="left")
    for col in ("system", "scenarios", "generations", "sigma2_scenario", "sigma2_generation", "sigma2_judge",
                "sigma2_residual", "F", "p", "A vs B"):
        table.add_column(col, justify="left" if col in ("system", "A vs B") else "right")
    for system, r in report["systems"].items():
        b = own[system]
        table.add_row(
            safe_text(system), str(b["scenarios"]), str(b["generations"]), f"{r['sigma2_scenario']:.4f}",
            f"{r['sigma2_generation']:.4f}", f"{r['sigma2_judge']:.4f}", f"{r['sigma2_residual']:.4f}",
            f"{r['f_statistic']:.2f}", f"{r['p_value']:.2g}", safe_text(r["strategies"].get("winner_ab", "")),
        )
    out.print(table)
    offsets = report["judge_system_offsets"]
    judges = list(next(iter(offsets.values())).keys()) if offsets else []
    heat = Table(title="judge offsets by system (judge mean - panel mean)", title_justify="left")
    heat.add_column("system")
    for j in judges:
        heat.add_column(safe_text(j), justify="right")
    for system, row in offsets.items():
        heat.add_row(safe_text(system), *[f"{row[j]:+.3f}" for j in judges])
    out.print(heat)
    for p in report.get("self_preference", []):
        out.print(
            f"self-preference: {safe_text(p['judge_id'])} on {safe_text(p['system_id'])} ({safe_text(p['family'])}): offset "
            f"{p['offset']:+.3f}, on other families {p['other_offset']:+.3f}, excess {p['excess']:+.3f}",
            markup=False,
        )


COMMAND = Command(
    help="CyclicJudge: per-system judge offsets, F-test and allocation-strategy variances.",
    item_set_help="Item set to decompose",
    title="CyclicJudge",
    flags=(
        Flag("budgets", "--budgets", "Per-scenario judge-call budgets, e.g. 5,10,20 (multiples of K)",
             parse=budgets_of),
        Flag("at_generations", "--at-generations", "Operating point m", Rule(low=1, integer=True)),
        Flag("at_judges", "--at-judges", "Operating point K", Rule(low=1, integer=True)),
    ),
    show=print_cyclic,
)
