r"""Henderson's Method I: variance components of incomplete random-effects designs from every record.

Model (all facets random, infinite universes; Searle, Casella and McCulloch
1992, *Variance Components*, ch. 5, "ANOVA estimation of variance components
from unbalanced data", section 5.2 Henderson's Method I; Henderson 1953)
    :math:`y = \mu 1_N + \sum_c Z_c u_c`, one vector :math:`u_c \sim N(0, \sigma^2_c I)`
    per effect ``c`` of the :class:`~jurymeter.stats.design.Design` (a facet set
    closed under nesting; the last effect, all facets, is the residual and has
    one level per record). :math:`Z_c` is the 0/1 incidence of records in the
    levels of ``c``; a level of ``c`` is a combination of the values of its facets'
    columns, so a nested facet's labels need only be unique within its nest.

Quadratic forms (SCM eq. 5.11 and 5.13)
    For a facet set :math:`A` with observed levels :math:`l`, counts :math:`n_l`
    and sums :math:`y_{l\cdot}`, :math:`T_A = \sum_l y_{l\cdot}^2 / n_l`
    (:math:`T_\emptyset = y_{\cdot\cdot}^2 / N`, :math:`T_{\text{all}} = \sum y^2`).
    The sum of squares of effect :math:`S` is the balanced-ANOVA combination of
    T's, by inclusion-exclusion over its primary facets :math:`R(S)`,
    :math:`SS_S = \sum_{U \subseteq R(S)} (-1)^{|U|} T_{S \setminus U}`
    (so :math:`SS_{si} = T_{si} - T_s - T_i + T_\emptyset`,
    :math:`SS_{r:sij} = T_{sijr} - T_{sij}`).

Expectations (SCM eq. 5.14-5.16)
    :math:`E[T_A] = N\mu^2 + \sum_c \sigma^2_c\, k(A, c)` with
    :math:`k(A, c) = \sum_{l \in A} \sum_{m \in c} n_{lm}^2 / n_l`, where
    :math:`n_{lm}` counts the records in level :math:`l` of :math:`A` and level
    :math:`m` of :math:`c`: the cells of :math:`A \cup c`. So
    :math:`k(A, c) = N` when :math:`c \subseteq A`, :math:`k(A, \text{residual})`
    is the number of observed levels of :math:`A`, and
    :math:`k(\emptyset, c) = \sum_m n_m^2 / N`. :math:`N\mu^2` cancels in every
    :math:`SS_S` (the signs of the inclusion-exclusion sum to zero), so
    :math:`E[SS] = K \sigma^2` and :math:`\hat\sigma^2 = K^{-1} SS`.

Degrees of freedom and mean squares
    :math:`df_S` is the coefficient of the residual in :math:`E[SS_S]`, the
    inclusion-exclusion of observed level counts
    :math:`\sum_{U \subseteq R(S)} (-1)^{|U|} L_{S \setminus U}`; :math:`MS_S = SS_S / df_S`
    and ``coefficients`` :math:`= K / df` give :math:`E[MS] = C \sigma^2`, the
    unbalanced analogue of :meth:`Design.ems_matrix`. On balanced data
    :math:`T`, :math:`SS`, :math:`df` and :math:`C` are the balanced ones, so the
    estimates equal :func:`~jurymeter.stats.gstudy.fit_gstudy`'s.

Every T and every :math:`k` comes from integer-coded group counts and sums
(``numpy.bincount``) of the records. When the facets' full crossing has at most
``DENSE_CODES_PER_RECORD`` cells per record, one ``bincount`` of the records'
full key gives its count and sum tables and every facet set's table is a sum
of them over axes (:class:`~jurymeter.stats.henderson_sums._Tensor`: each record
read once); otherwise one ``bincount`` per facet set on compressed group codes
(:class:`~jurymeter.stats.henderson_sums._Codes`; the sums: :mod:`jurymeter.stats.henderson_sums`). ``docs/henderson.md`` says why this estimator, its costs
and what the D-study uses for sizes.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design, Effect
from jurymeter.stats.gstudy import GStudy
from jurymeter.stats.henderson_sums import (
    DEFAULT_COLUMNS,
    DENSE_CODES_PER_RECORD,
    _Codes,
    _columns,
    _facet_codes,
    _k,
    _sizes,
    _t_sets,
    _Tensor,
    _tensor_sizes,
    column_codes,
)

__all__ = [
    "BOOTSTRAP_BATCH_VALUES",
    "DEFAULT_COLUMNS",
    "DENSE_CODES_PER_RECORD",
    "HENDERSON_INTERVALS",
    "IDENTIFIED_RCOND",
    "RECORD_BOOTSTRAP_VALUES",
    "BootstrapMethod",
    "HendersonFit",
    "HendersonIntervals",
    "RecordPattern",
    "chisquare_draws",
    "column_codes",
    "henderson1",
    "interval_draws_kind",
]

# The components are refused as not identified when K's smallest singular value is
# below this fraction of its largest (a facet or an interaction the records never vary).
IDENTIFIED_RCOND = 1e-12


@dataclass(frozen=True, slots=True)
class HendersonFit(GStudy):
    r"""A :class:`~jurymeter.stats.gstudy.GStudy` fitted by Henderson's Method I.

    Every :class:`GStudy` field has its balanced meaning where the data are
    balanced; on incomplete data (module docstring):

    Attributes
    ----------
    sizes
        Per facet, the observed levels: of a facet nested in none, its distinct
        levels; of a nested facet, the most levels within one level of its nest
        (the axis length a dense array would need). Balanced: the block's sizes.
    df, ss, ms
        Henderson's :math:`df_S` (coefficient of the residual in
        :math:`E[SS_S]`), :math:`SS_S` and :math:`MS_S = SS_S/df_S`.
    sigma2
        The Henderson I components (unbiased; may be negative).
    grand_mean
        Mean of all records (unweighted).
    coefficients
        ``C`` with :math:`E[MS] = C \sigma^2`, rows and columns in ``effects``
        order; ``components = solve(coefficients, ms)``. Use it, not
        :meth:`Design.ems_matrix` of ``sizes``, for anything mapping mean squares
        to components (a bootstrap of mean squares, say): they differ unless the
        data are balanced.
    levels
        Observed levels per effect label (:math:`L_S`; the residual's are the records).
    n_records
        Records used (non-null responses).
    dstudy_sizes
        The native D-study's size of every facet but the system: of a facet
        nested in others, the harmonic mean over its nest's levels of the levels
        within each; of a crossed facet, the harmonic mean over systems of the
        levels each system was observed with (``docs/henderson.md``). Balanced:
        the block's sizes.
    """

    coefficients: np.ndarray
    levels: dict[str, int]
    n_records: int
    dstudy_sizes: dict[str, float]


def henderson1(
    records: pl.DataFrame | pl.LazyFrame,
    design: Design | str,
    *,
    response: str = "score",
    facets: Mapping[str, str] | None = None,
    system: str = "s",
) -> HendersonFit:
    r"""Variance components of an incomplete random-effects design by Henderson's Method I.

    Parameters
    ----------
    records
        One row per observation: a column per design facet and ``response``.
        Rows with a null response are left out; every other row is used.
    design
        The design (:class:`Design` or its notation, e.g. ``"s x i x j x r:sij"``,
        ``"s x i x g:si x r:sig"``, ``"(c:m) x i x j"``).
    response
        Column of the observations. Default ``"score"``.
    facets
        Design letter -> column, over :data:`DEFAULT_COLUMNS` (``s`` ``system_id``,
        ``i`` ``item_id``, ``j`` ``judge_id``, ``g`` ``generation``, ``r``
        ``replicate``). A nested facet's values need only be unique within its nest.
    system
        The object of measurement, for ``dstudy_sizes`` (crossed facets are
        counted per system). Default ``"s"``; any letter, or one outside the
        design (then crossed facets count their levels overall).

    Returns
    -------
    HendersonFit
        A :class:`~jurymeter.stats.gstudy.GStudy` with Henderson's SS, df, MS
        and components, plus ``coefficients``, ``levels``, ``n_records`` and
        ``dstudy_sizes``.

    Raises
    ------
    DesignError
        A design letter has no column, a column is missing, a facet value is
        null, a response is NaN or infinite, two records share every facet
        (the residual needs one record per level: add the replicate facet), an
        effect has no degrees of freedom (a facet with one level), or the
        components are not identified by the records.

    Notes
    -----
    :math:`T_A = \sum_l y_{l\cdot}^2/n_l`,
    :math:`SS_S = \sum_{U \subseteq R(S)} (-1)^{|U|} T_{S\setminus U}`,
    :math:`E[SS_S] = \sum_c \sigma^2_c \sum_U (-1)^{|U|} k(S\setminus U, c)`,
    :math:`k(A,c) = \sum_l \sum_m n_{lm}^2/n_l`; solve
    :math:`E[SS] = SS` (Searle, Casella and McCulloch 1992, section 5.2, eq.
    5.11-5.16; module docstring). The responses are centred on their mean
    first: every T changes by the same :math:`-2cY + c^2N`, which cancels in
    the SS, and the T's stay small so their differences keep their digits.

    Examples
    --------
    >>> import polars as pl
    >>> frame = pl.DataFrame({"system_id": ["a", "a", "b", "b", "b"],
    ...                       "item_id": ["x", "y", "x", "y", "z"],
    ...                       "score": [1.0, 2.0, 2.0, 4.0, 3.0]})
    >>> fit = henderson1(frame, "s x i")
    >>> fit.effects, fit.n_records
    (('s', 'i', 'si'), 5)
    """
    return RecordPattern.of(records, design, response=response, facets=facets, system=system).fit()


# Parametric bootstrap draws are simulated and refitted in batches of at most this
# many record values (draws x records) at a time: memory stays bounded.
BOOTSTRAP_BATCH_VALUES = 2_000_000
BootstrapMethod = Literal["pivotal", "percentile"]
HendersonIntervals = Literal["auto", "chisquare", "records"]
HENDERSON_INTERVALS: tuple[HendersonIntervals, ...] = ("auto", "chisquare", "records")
# ``"auto"`` intervals refit the records (the record bootstrap) while records x
# draws stay at or below this many simulated values (250,000 records at 800
# draws: about 15 s here), and take chi-square draws above it (no refit: a
# 10M-record item set's 800 refits would take about 10 minutes). The record
# bootstrap is the one whose coverage holds on heavily incomplete designs; the
# chi-square draws cover 95-97% with few cells missing and about 93% with many
# (docs/henderson.md, "Which intervals by default").
RECORD_BOOTSTRAP_VALUES = 200_000_000


def interval_draws_kind(choice: HendersonIntervals, records: int, n_boot: int) -> tuple[Literal["chisquare", "records"], str | None]:
    """Which interval draws a Henderson fit of ``records`` takes, and why when ``choice`` is ``"auto"``.

    ``"records"`` and ``"chisquare"`` are taken as asked (no reason).
    ``"auto"``: the record bootstrap (:meth:`RecordPattern.bootstrap`) when
    ``records * n_boot <= RECORD_BOOTSTRAP_VALUES``, else
    :func:`chisquare_draws`; the reason says which and the numbers.
    """
    if choice not in HENDERSON_INTERVALS:
        msg = f"henderson_intervals must be one of {HENDERSON_INTERVALS}, got {choice!r}"
        raise DesignError(msg)
    if choice != "auto":
        return choice, None
    values = records * n_boot
    if values <= RECORD_BOOTSTRAP_VALUES:
        return "records", (f"auto: the record bootstrap ({records:,} records x {n_boot} draws, within "
                           f"{RECORD_BOOTSTRAP_VALUES:,} simulated values)")
    return "chisquare", (f"auto: chi-square draws ({records:,} records x {n_boot} draws is above the record "
                         f"bootstrap's {RECORD_BOOTSTRAP_VALUES:,} simulated values)")


def chisquare_draws(
    fit: HendersonFit, n_boot: int, seed: int = 0, *, method: BootstrapMethod = "pivotal"
) -> np.ndarray:
    r"""``(n_boot, effects)`` draws of the components from independent chi-square mean squares (no refit).

    The balanced path's chi-square draws generalised to Henderson's mean
    squares: each :math:`MS^*_e = E[MS_e](\hat\sigma^2)\,\chi^2_{df_e}/df_e`
(:math:`E[MS](\hat\sigma^2) = C\hat\sigma^2 = MS_{\text{obs}}`),
    independent across effects, with :math:`E[MS] = C\sigma^2` (Henderson's
    ``coefficients``, :math:`df_e` its, possibly fractional, degrees of
    freedom). ``"percentile"``: the draws :math:`C^{-1} MS^*`. ``"pivotal"``
    (default), as :func:`jurymeter.stats.bootstrap.pivotal_mean_squares`:
    :math:`C^{-1}(MS_{\text{obs}}\, df / \chi^2_{df})` (the ratio
    :math:`MS^*/E[MS]` stands in for the pivot, so the expected mean squares
    cancel). On balanced data these are the balanced path's draws exactly
    (same chi-squares from the same seed); on incomplete data the mean squares
    are neither chi-square nor independent, and the coverage this gives is
    measured in ``docs/henderson.md``. O(effects x draws): no record is read.
    """
    if method not in ("pivotal", "percentile"):
        msg = f"method must be 'pivotal' or 'percentile', got {method!r}"
        raise DesignError(msg)
    rng = np.random.default_rng(seed)
    df = np.asarray(fit.df, dtype=np.float64)
    chi = rng.chisquare(df, size=(n_boot, len(df)))
    ms = np.asarray(fit.ms) * (df / chi if method == "pivotal" else chi / df)
    draws: np.ndarray = np.linalg.solve(fit.coefficients, ms.T).T
    return draws


class RecordPattern:
    r"""The observed records of a design, coded once: Henderson I fits of any responses on that pattern.

    Built by :meth:`of` from the records (the checks of :func:`henderson1`);
    :meth:`fit` gives the Henderson I fit of the records' responses and
    :meth:`bootstrap` the parametric bootstrap draws of the components, each
    a refit of responses simulated on the same records (the same missing
    pattern). The expectation matrix ``K`` depends only on the pattern, so a
    refit is the T's (one ``bincount`` per facet set) and one solve.
    """

    def __init__(
        self, design: Design, codes: _Codes | None, y: np.ndarray | None, system: str, tensor: _Tensor | None = None,
        *, table: np.ndarray | None = None,
    ) -> None:
        self.design, self.system = design, system
        self._codes, self._y = codes, y
        self.tensor = tensor
        # A pattern given as a table (:meth:`of_table`): the responses of the present
        # cells of the full crossing; the records' codes are made only if asked for.
        self._table = table
        if y is not None:
            self.n = len(y)
        elif tensor is not None and table is not None:
            self.n = int(tensor.counts(frozenset(design.facets)).sum())
        else:  # pragma: no cover - the constructors give one or the other
            msg = "a record pattern needs the records' responses or a table of them"
            raise DesignError(msg)
        self.t_sets = _t_sets(design)
        n_effects = len(design.effects)
        k_matrix = np.zeros((n_effects, n_effects))
        # signs[row][t] : the sign of T_t in SS_row
        index = {a: k for k, a in enumerate(self.t_sets)}
        signs = np.zeros((n_effects, len(self.t_sets)))
        k_cache: dict[tuple[Effect, Effect], float] = {}
        for row, effect in enumerate(design.effects):
            primary = sorted(design.primary(effect))
            for r in range(len(primary) + 1):
                for removed in itertools.combinations(primary, r):
                    a = effect - frozenset(removed)
                    sign = (-1.0) ** r
                    signs[row, index[a]] += sign
                    for col, c in enumerate(design.effects):
                        if (a, c) not in k_cache:
                            k_cache[(a, c)] = (
                                _k(self.codes, a, c, self.n) if tensor is None else tensor.k(a, c, self.n)
                            )
                        k_matrix[row, col] += sign * k_cache[(a, c)]
        df = k_matrix[:, -1].copy()
        flat = [design.label(e) for e, d in zip(design.effects, df, strict=True) if d < 0.5]
        if flat:
            names = {"s": "system", "i": "item", "j": "judge", "g": "generation", "r": "replicate", "c": "config",
                     "m": "model"}
            crossed = sorted({letter for label in flat for letter in label if letter in names})
            if "s" in crossed and "j" in crossed:
                hint = ("no two judges scored the same system on shared items (each system's judge is its own): "
                        "fit one judge at a time (a judge universe of one judge), or add records where judges share "
                        "systems and items")
            else:
                facets = " x ".join(names[letter] for letter in crossed) or "a facet"
                hint = (f"the {facets} levels are never crossed, or one has a single level: restrict the records "
                        "(a judge universe or a system population) to a part where they cross, or add records that "
                        "cross them")
            msg = f"effects {flat} have no degrees of freedom in these records: {hint}"
            raise DesignError(msg)
        singular = np.linalg.svd(k_matrix, compute_uv=False)
        if singular[-1] < IDENTIFIED_RCOND * singular[0]:
            msg = (
                f"design {design.labels}: the records do not identify every component (expected sums of "
                "squares are linearly dependent); some facets are never crossed in these records"
            )
            raise DesignError(msg)
        self.k_matrix, self.df, self.signs = k_matrix, df, signs

    @property
    def codes(self) -> _Codes:
        """The records' codes of every facet set (made from the table on first use for a table pattern)."""
        if self._codes is None:
            assert self.tensor is not None
            cells = self.tensor.records()
            shape = self.tensor.shape
            facet_codes = {}
            rest = cells.copy()
            for facet, size in zip(reversed(self.design.facets), reversed(shape), strict=True):
                facet_codes[facet] = rest % size
                rest //= size
            self._codes = _Codes({f: facet_codes[f] for f in self.design.facets}, self.design.facets, self.n)
        return self._codes

    @property
    def y(self) -> np.ndarray:
        """The records' responses (read from the table, in the order of its cells, for a table pattern)."""
        if self._y is None:
            assert self.tensor is not None
            assert self._table is not None
            self._y = self._table.reshape(-1)[self.tensor.records()]
        return self._y

    @classmethod
    def of_table(cls, design: Design | str, present: np.ndarray, values: np.ndarray, *, system: str = "s") -> RecordPattern:
        """The pattern of records given as a table of the facets' full crossing (axis ``k``: ``design.facets[k]``).

        ``present`` marks the cells holding a record (one each), ``values`` their
        responses (anything elsewhere). The same fit as :meth:`of` on those records
        (the records are the present cells in C order), without coding any record:
        the count and sum tables are the tables themselves.
        """
        design = Design.parse(design) if isinstance(design, str) else design
        if present.ndim != len(design.facets) or present.shape != values.shape:
            msg = (f"a table pattern needs one axis per facet of {design.labels} ({len(design.facets)}) and values "
                   f"of its shape; got presence {present.shape} and values {values.shape}")
            raise DesignError(msg)
        if not present.any():
            msg = "records: no present cell to fit"
            raise DesignError(msg)
        table = np.where(present, values, 0.0).astype(np.float64, copy=False)
        if not np.isfinite(table).all():
            msg = "records: responses must be finite; the table has NaN or infinite values"
            raise DesignError(msg)
        return cls(design, None, None, system, _Tensor.of_table(design.facets, present), table=table)

    @classmethod
    def of(
        cls,
        records: pl.DataFrame | pl.LazyFrame,
        design: Design | str,
        *,
        response: str = "score",
        facets: Mapping[str, str] | None = None,
        system: str = "s",
    ) -> RecordPattern:
        """The pattern of ``records`` (arguments and errors as :func:`henderson1`)."""
        design = Design.parse(design) if isinstance(design, str) else design
        columns = _columns(design, facets)
        lazy = records.lazy() if isinstance(records, pl.DataFrame) else records
        schema = lazy.collect_schema()
        absent = [c for c in (*columns.values(), response) if c not in schema]
        if absent:
            msg = f"records: columns {absent} are missing; have {list(schema.names())}"
            raise DesignError(msg)
        used = [*dict.fromkeys(columns.values()), response]
        if isinstance(records, pl.DataFrame):  # a selection of columns is free; filter only when needed
            frame = records.select(used)
            if frame.get_column(response).null_count():
                frame = frame.filter(pl.col(response).is_not_null())
        else:
            frame = lazy.select(used).filter(pl.col(response).is_not_null()).collect()
        n = frame.height
        if n == 0:
            msg = f"records: no non-null {response!r} to fit"
            raise DesignError(msg)
        nulls = [c for c in dict.fromkeys(columns.values()) if frame.get_column(c).null_count()]
        if nulls:
            msg = f"records: facet columns {nulls} have null values; every used record needs a level of each facet"
            raise DesignError(msg)
        y = frame.get_column(response).cast(pl.Float64).to_numpy()
        if not np.isfinite(y).all():
            msg = f"records: {response!r} must be finite; it has NaN or infinite values"
            raise DesignError(msg)
        facet_codes = _facet_codes(frame, columns)
        codes = _Codes(facet_codes, design.facets, n)
        tensor = _Tensor.build(facet_codes, design.facets, n)
        residual = design.effects[-1]
        distinct = codes.codes(residual)[1] if tensor is None else tensor.levels(residual)
        if distinct != n:
            msg = (
                f"records: {n - distinct} record(s) repeat a level of every facet "
                f"{design.label(residual)!r} ({[columns[f] for f in design.facets]}); the residual needs one "
                "record per level: add a replicate facet (e.g. 'r:sij') or average the repeats first"
            )
            raise DesignError(msg)
        return cls(design, codes, y, system, tensor)

    def sums_of_squares(self, y: np.ndarray) -> np.ndarray:
        """``(draws, effects)`` Henderson SS of ``(draws, records)`` responses on this pattern (centred first)."""
        y = np.atleast_2d(y)
        draws = y.shape[0]
        centred = y - y.mean(axis=1, keepdims=True)
        t = np.empty((draws, len(self.t_sets)))
        offsets = np.arange(draws, dtype=np.int64)[:, None]
        for k, a in enumerate(self.t_sets):
            if not a:
                t[:, k] = centred.sum(axis=1) ** 2 / self.n
                continue
            code, levels = self.codes.codes(a)
            if levels == self.n and len(a) == len(self.design.facets):
                t[:, k] = np.einsum("bn,bn->b", centred, centred)
                continue
            flat = (code[None, :] + offsets * levels).ravel()
            sums = np.bincount(flat, weights=centred.ravel(), minlength=draws * levels).reshape(draws, levels)
            t[:, k] = (sums * sums / self.codes.counts(a)).sum(axis=1)
        ss: np.ndarray = t @ self.signs.T
        return ss

    def _tensor_ss(self, tensor: _Tensor, y: np.ndarray | None) -> np.ndarray:
        """The SS of ``y`` (records), or of the pattern's own table when ``y`` is ``None`` (a table pattern)."""
        if y is None:
            assert self._table is not None
            present = tensor.counts(frozenset(self.design.facets))
            centred = (self._table - self._table.sum() / self.n) * present  # zero where no record
        else:
            centred = y - y.mean()
        sums = tensor.sums(centred)
        flat = centred.reshape(-1)
        t = np.empty(len(self.t_sets))
        for k, a in enumerate(self.t_sets):
            if len(a) == len(self.design.facets):
                t[k] = float(np.dot(flat, flat))
            else:
                t[k] = tensor.t(sums, a)
        ss: np.ndarray = self.signs @ t
        return ss

    def fit(self) -> HendersonFit:
        """The Henderson I fit of the records' own responses."""
        design = self.design
        tensor = self.tensor
        if tensor is None:
            ss = self.sums_of_squares(self.y)[0]
            sizes, dstudy = _sizes(design, self.codes, self.system)
            levels = {design.label(e): self.codes.codes(e)[1] for e in design.effects}
        else:
            ss = self._tensor_ss(tensor, self._y)
            sizes, dstudy = _tensor_sizes(design, tensor, self.system)
            levels = {design.label(e): tensor.levels(e) for e in design.effects}
        sigma2 = np.linalg.solve(self.k_matrix, ss)
        return HendersonFit(
            design=design,
            sizes=sizes,
            effects=design.labels,
            df=self.df.copy(),
            ss=ss,
            ms=ss / self.df,
            sigma2=sigma2,
            grand_mean=float(self.y.mean()) if self._table is None else float(self._table.sum() / self.n),
            coefficients=self.k_matrix / self.df[:, None],
            levels=levels,
            n_records=self.n,
            dstudy_sizes=dstudy,
        )

    def simulate(self, sigma2: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
        r"""``(draws, records)`` responses on this pattern: :math:`\sum_c u_c[\text{level}]`, :math:`u_c \sim N(0, \sigma^2_c)`."""
        y = np.zeros((draws, self.n))
        for c, effect in enumerate(self.design.effects):
            if sigma2[c] <= 0:
                continue
            code, levels = self.codes.codes(effect)
            effects = rng.standard_normal((draws, levels)) * np.sqrt(sigma2[c])
            y += effects[:, code] if levels != self.n or len(effect) != len(self.design.facets) else effects
        return y

    def bootstrap(
        self, fit: HendersonFit, n_boot: int, seed: int = 0, *, method: BootstrapMethod = "pivotal"
    ) -> np.ndarray:
        r"""``(n_boot, effects)`` parametric bootstrap draws of the components on the observed pattern.

        Each draw simulates responses on these records from the estimated
        components truncated at zero (normal effects, one per level of every
        effect, the residual one per record) and refits Henderson I.
        ``"percentile"``: the refits' components (plug-in). ``"pivotal"``
        (default): the refits' ratios :math:`MS^*_e / E^*[MS_e]` (with
        :math:`E^*[MS] = C \hat\sigma^2_+`) stand in for the chi-square pivot
        of the balanced case, and each draw is
        :math:`C^{-1} (MS_{\text{obs}} / (MS^* / E^*[MS]))`. On balanced data
        :math:`MS^*_e / E^*[MS_e] \sim \chi^2_{df_e}/df_e`, independent, so
        the pivotal draws have the distribution of
        :func:`jurymeter.stats.bootstrap.pivotal_mean_squares`'s; on
        incomplete data the mean squares are neither chi-square nor
        independent and the refits carry both (``docs/henderson.md``).
        """
        if method not in ("pivotal", "percentile"):
            msg = f"method must be 'pivotal' or 'percentile', got {method!r}"
            raise DesignError(msg)
        rng = np.random.default_rng(seed)
        truth = np.maximum(fit.sigma2, 0.0)
        coefficients = self.k_matrix / self.df[:, None]
        expected = coefficients @ truth
        batch = max(1, BOOTSTRAP_BATCH_VALUES // self.n)
        out = np.empty((n_boot, len(self.design.effects)))
        for start in range(0, n_boot, batch):
            b = min(batch, n_boot - start)
            simulated = self.simulate(truth, b, rng)
            if self.tensor is None:
                ms = self.sums_of_squares(simulated) / self.df
            else:
                tensor = self.tensor
                ms = np.stack([self._tensor_ss(tensor, row) for row in simulated]) / self.df
            if method == "percentile":
                out[start : start + b] = np.linalg.solve(coefficients, ms.T).T
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                pivot = np.asarray(fit.ms) * expected / ms
            out[start : start + b] = np.linalg.solve(coefficients, pivot.T).T
        return out
