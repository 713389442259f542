"""The ``jurymeter sequential`` command, as data: the sequential analysis's options as flags, and its printout.

The CLI builds the typer command from :data:`COMMAND` (the one fit path:
:func:`jurymeter.pipeline.jobs.command_job`); no statistics here. (``jurymeter
batch-plan``, which fits nothing, is a CLI command: :mod:`jurymeter.cli.plans`.)
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from jurymeter.analyses.commands import FIT_SETTINGS_RULES, Command, Flag, Rule
from jurymeter.analyses.sequential import MAX_RESAMPLES, UNITS
from jurymeter.render.text import fmt, out, safe_text


def print_sequential(report: dict[str, Any]) -> None:
    """Per judge: serial contrast, GLMM, predictive check, top-k selection and group contrasts, for a terminal."""
    out.print(f"item set {safe_text(report['item_set'])}: unit {report['unit']}, GLMM lags {report['lags']}"
              + (f"; {report['ratings_without_batch']:,} ratings without a batch position left out"
                 if report["ratings_without_batch"] else ""), markup=False)
    table = Table(title="per judge (95% batch-bootstrap intervals)", title_justify="left")
    columns = ("judge", "ratings", "batches", "scale", "serial contrast", "rho_1 (logit)", "batch SD",
               "check outside", "top (average)", "top (model)")
    for label in columns:
        table.add_column(label, justify="left" if label in ("judge", "scale") or label.startswith("top") else "right")
    def with_interval(j: dict[str, Any], key: str) -> str:
        low, high = j.get(f"{key}_low"), j.get(f"{key}_high")
        return fmt(j.get(key)) + (f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else "")

    for judge, j in report["judges"].items():
        checked = "" if j.get("check_outside") is None else f"{j['check_outside']}/{j['check_terms']}"
        table.add_row(safe_text(judge), str(j["ratings"]), str(j["batches"]), j.get("response") or "",
                      with_interval(j, "serial_contrast"), with_interval(j, "rho_1"), with_interval(j, "batch_sd"),
                      checked, safe_text(j.get("top_naive") or ""), safe_text(j.get("top_model") or ""))
    out.print(table)
    for judge, j in report["judges"].items():
        for part, reason in j["reasons"].items():
            out.print(f"{safe_text(judge)}: {part} not estimated: {safe_text(reason)}", markup=False)
        for row in j.get("groups") or []:
            out.print(f"{safe_text(judge)}: group A - group B ({row.get('method')}): {fmt(row.get('estimate'))} "
                      f"(SE {fmt(row.get('se'))}, p {fmt(row.get('p_value'), 4)})"
                      + (f", {row['outcome']}" if row.get("outcome") else ""), markup=False)


COMMAND = Command(
    help="Serial dependence, the Markov GLMM, its predictive check, top-k selection and group contrasts per judge.",
    item_set_help="Pointwise item set with batch_id and batch_position",
    title="the sequential analysis",
    flags=(
        Flag("lags", "--lags", "Markov order of the GLMM (1-3)", Rule(low=1, high=3, integer=True)),
        Flag("n_boot", "--boot", f"Batch-bootstrap resamples (GLMM refits); 0: [fit] n_boot, at most {MAX_RESAMPLES}",
             Rule(low=0, integer=True)),
        Flag("unit", "--unit", "What a rated unit is: system, item or output", Rule(choices=tuple(UNITS))),
        Flag("top_k", "--top-k", "k of the top-k selection", Rule(low=1, integer=True)),
        Flag("group_a", "--group-a", "Units of group A, comma-separated"),
        Flag("group_b", "--group-b", "Units of group B, comma-separated"),
        Flag("reference", "--reference", "The group a reference answer says is better: A or B"),
        Flag("n_sim", "--simulations", "Simulated sets of the predictive check; 0: as --boot",
             Rule(low=0, integer=True)),
        Flag("seed", "--seed", "Random seed", FIT_SETTINGS_RULES["seed"], settings=True),
    ),
    show=print_sequential,
)
