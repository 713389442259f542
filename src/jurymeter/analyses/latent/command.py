"""The ``jurymeter latent`` command, as data: the latent analysis's options as flags, and its printout."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from jurymeter.analyses.commands import FIT_SETTINGS_RULES, Command, Flag, Rule
from jurymeter.analyses.latent import LINKS
from jurymeter.render.text import fmt, out, safe_text


def print_latent(report: dict[str, Any]) -> None:
    """The latent components with their intervals, then E rho^2 and the MDD95, latent and on the score scale."""
    out.print(f"item set {safe_text(report['item_set'])}: {report['records']:,} judgments in {report['cells']:,} cells, "
              f"scores {', '.join(f'{v:g}' for v in report['categories'])}, {report['link']} link", markup=False)
    table = Table(title="latent variance components (95% Wald intervals)", title_justify="left")
    for col in ("component", "estimate", "95% interval"):
        table.add_column(col, justify="left" if col == "component" else "right")
    for name, value in report["components"].items():
        low, high = report["component_intervals"].get(name, (None, None))
        table.add_row(f"sigma2_{name}" + (" (boundary)" if name in report["boundary"] else ""), fmt(value, 4),
                      f"[{fmt(low, 4)}, {fmt(high, 4)}]")
    table.add_row("sigma2_residual (the link's)", fmt(report["residual"], 4), "")
    out.print(table)
    d = report["dstudy"]
    for key, label in (("erho2", "E rho^2 (latent)"), ("mdd95", "MDD95 (latent units)"),
                       ("mdd95_score", "MDD95 (score points, at the grand mean)")):
        low, high = d.get(f"{key}_ci") or (None, None)
        reason = (report.get("null_reasons") or {}).get(f"dstudy.{key}")
        out.print(f"{label}: {fmt(d.get(key))} [{fmt(low)}, {fmt(high)}]" + (f" ({safe_text(reason)})" if reason else ""),
                  markup=False)


COMMAND = Command(
    help="Latent-scale G-study of binary or ordinal scores: crossed random effects on a logit or probit scale.",
    item_set_help="Pointwise item set with binary or ordinal scores",
    title="the latent-scale G-study",
    flags=(
        Flag("link", "--link", "'logit' (default) or 'probit'", Rule(choices=LINKS)),
        Flag("seed", "--seed", "Random seed", FIT_SETTINGS_RULES["seed"], settings=True),
    ),
    show=print_latent,
)
