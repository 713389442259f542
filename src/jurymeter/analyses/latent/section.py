"""The latent-scale G-study's report section: its components and its D-study, latent and on the score scale."""

from __future__ import annotations

from typing import Any

import polars as pl

from jurymeter.render.html import SectionBuilder
from jurymeter.render.html import escape as _e
from jurymeter.render.html import number as _num
from jurymeter.render.html import table_html as _table

SCALES = {"latent": "latent (logit or probit units)", "score": "score points, at the grand mean"}


def latent_section(page: SectionBuilder) -> None:
    """A lead saying what the latent scale changes, the components, the D-study; nothing when it did not run."""
    dstudy, components = page.rows("latent_dstudy"), page.rows("latent_components")
    if dstudy.height == 0:
        return
    summary = page.summary
    page.lead(_lead(dstudy, summary))
    page.add(_table(
        ["component", "estimate (latent units\u00b2)", "95 % interval", "at the boundary 0", "why no interval"],
        [[f"<code>{_e(r['component'])}</code>", _e(_num(r["estimate"])), _e(_interval(r["low"], r["high"])),
          "yes" if r["boundary"] else "", _e(r.get("reason") or "")] for r in components.iter_rows(named=True)],
        numeric=[False, True, True, False, False],
    ))
    page.add('<p class="note">sigma2_residual is the link\u2019s own variance (\u03c0\u00b2/3 for the logit, 1 for '
             "the probit): a judgment\u2019s noise around its cell on the latent scale (docs/latent.md).</p>")
    page.add(_table(
        ["quantity", "scale", "estimate", "95 % interval", "why none (value or interval)"],
        [[_e("E\u03c1\u00b2 (0\u20131)" if r["quantity"] == "erho2" else "MDD95"), _e(SCALES.get(r["scale"], r["scale"])),
          _e(_num(r["estimate"])), _e(_interval(r["low"], r["high"])), _e(r["reason"] or "")]
         for r in dstudy.iter_rows(named=True)],
        numeric=[False, False, True, True, False],
    ))


def _interval(low: Any, high: Any) -> str:
    return "" if low is None or high is None else f"{_num(low)} \u2013 {_num(high)}"


def _lead(dstudy: pl.DataFrame, summary: Any) -> str:
    rows = {(r["quantity"], r["scale"]): r for r in dstudy.iter_rows(named=True)}
    erho2, mdd = rows.get(("erho2", "latent"), {}), rows.get(("mdd95", "score"), {})
    categories = summary.get("latent_categories")
    kind = "binary" if categories == 2 else f"{categories}-category ordinal" if categories else "ordinal"
    text = (f"The {kind} scores modelled on a latent {summary.get('latent_link') or ''} scale, where each step "
            "between two scores has the width the judges give it (their thresholds) rather than one point")
    if erho2.get("estimate") is not None:
        text += f": E\u03c1\u00b2 {_num(erho2['estimate'])}"
        if mdd.get("estimate") is not None:
            text += f", and two systems need to differ by {_num(mdd['estimate'])} score points at the grand mean"
        text += ("; compare them with the G-study of raw scores above, which takes every step as one point: the "
                 "two part where scores crowd a floor or a ceiling.")
    else:
        text += f": E\u03c1\u00b2 cannot be estimated ({erho2.get('reason') or 'see why none'})."
    return text
