"""The analysis seam: the parts every analysis of a fit provides.

A *fit* is one item set under one judge universe and one system population
(:class:`jurymeter.pipeline.jobs.FitJob`). Planning, the fit cache, the run
summary, the tidy tables, the report page and the CLI iterate over the
registered analyses (:mod:`jurymeter.analyses`) and know none of them by name.
An :class:`Analysis` is its name, title and order and one implementation of
each part, and each reader of the registry reads one part:

- :class:`FitPart` (planning, :mod:`jurymeter.pipeline.fit`): which item sets
  it applies to (``protocols``, ``applies``); which blocks of the fit's records
  it reads (``modes``): the pipeline decides every analysis's block at once and
  reads the records in one scan, or one scan per item chunk
  (:func:`jurymeter.stats.blocks.fit_chunks`), feeding each chunk to every
  analysis that asked for it; the stored columns and judge health it reads; how
  one fit becomes a frozen, typed result (``start`` returns a :class:`Fitting`,
  fed chunk by chunk, whose ``finish`` gives the result);
- :class:`TablesPart` (:mod:`jurymeter.pipeline.tables`): its tidy tables and
  their schemas (``tables``, ``tabulate``);
- :class:`SummaryPart` (the fit's JSON, the run summary, the headlines, the
  history): the result as JSON (``report``), its entry in the run summary
  (``headline``, ``summarize``), its clause of a fit's headline (``sentence``),
  and the numbers the run history follows from run to run (``tracked``,
  :class:`Tracked`: read back from the published tables, never refitted);
- :class:`SectionPart` (:mod:`jurymeter.pipeline.page`): its section of the
  report page and the modules its figures import (``section``, ``figure_modules``);
- its command, as data (:attr:`Analysis.command`: a :class:`~jurymeter.analyses.commands.Command`
  the CLI builds the typer command from; the analysis never imports the CLI).

A new method with a default on one part touches no analysis; a change to one
part's abstract methods touches each analysis's implementation of that part only.

An analysis that does not apply to a fit it was planned for (CyclicJudge on
data with one generation) raises :class:`jurymeter.errors.NotApplicableError`
from ``start`` or ``finish``: the fit goes on, and the summary records the
reason. Any other :class:`~jurymeter.errors.JurymeterError` fails the fit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar

import polars as pl

from jurymeter.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from polars._typing import PolarsDataType

    from jurymeter.render.html import SectionBuilder
    from jurymeter.stats.blocks import FitChunks, GenerationMode

Result = TypeVar("Result")
Result_co = TypeVar("Result_co", covariant=True)  # a Fitting only gives its result
Options = TypeVar("Options")
HeadlineKind = Literal["number", "count", "text", "flag"]
Mapper = Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]]


@dataclass(frozen=True, slots=True)
class Table:
    """One tidy table an analysis publishes (``results/<run_id>/<name>.parquet``).

    ``schema`` lists the analysis's own columns, in order; every published row
    also starts with the fit's names (``item_set``, ``universe``, ``population``).
    """

    name: str
    schema: Mapping[str, PolarsDataType]
    doc: str


@dataclass(frozen=True, slots=True)
class Headline:
    """One headline number of an analysis: a key of its summary entry and a column of the Fits tables."""

    key: str
    label: str
    kind: HeadlineKind = "number"
    # A column of the Fits tables (page and terminal); False for numbers only the headline sentence says.
    table: bool = True
    doc: str = ""  # what the number means, with its unit (a note under the Fits tables)


@dataclass(frozen=True, slots=True)
class Tracked:
    """A number the run history follows from run to run, declared by the analysis that publishes it.

    The history (:mod:`jurymeter.pipeline.history`) reads it back from every
    published run folder, without refitting: from a column of one of the
    analysis's tables (``table``), or from a key of the analysis's part of a
    fit's summary entry (``headline``: per-fit counts such as records).

    Attributes
    ----------
    name : str
        What the page calls it (``"judge offset"``); unique within the analysis.
    unit : str
        Its unit, as axes and numbers say it (``"points"``, ``"share"``, ``"records"``).
    table : str or None
        The published table holding it (one of the analysis's :attr:`TablesPart.tables`).
    headline : str or None
        Instead of ``table``: a key of the analysis's summary entry (one value per fit, no interval).
    estimate : str
        The table's column holding the value (ignored for a ``headline``).
    low, high : str or None
        The columns of its 95% interval; ``None`` where the table has none (no drift flag then).
    subject : str or None
        The column naming each row's subject (``"judge_id"``); ``None``: one value per fit.
    select : tuple of (str, str) or None
        A ``(column, value)`` filter picking the rows of a long table (``("quantity", "mdd95")``).
    drift : bool
        Flag a change between consecutive runs larger than the intervals allow.
    """

    name: str
    unit: str
    table: str | None = None
    headline: str | None = None
    estimate: str = "estimate"
    low: str | None = None
    high: str | None = None
    subject: str | None = None
    select: tuple[str, str] | None = None
    drift: bool = False

    def __post_init__(self) -> None:
        if (self.table is None) == (self.headline is None):
            msg = f"tracked {self.name!r} must name exactly one of table and headline"
            raise ConfigError(msg)
        if (self.low is None) != (self.high is None):
            msg = f"tracked {self.name!r} must name both interval columns or neither, got low={self.low!r}, high={self.high!r}"
            raise ConfigError(msg)

    def columns(self) -> tuple[str, ...]:
        """The table columns the history reads (the fit's names excluded): a projection."""
        if self.table is None:
            return ()
        wanted = [self.estimate, self.low, self.high, self.subject, self.select[0] if self.select else None]
        return tuple(dict.fromkeys(c for c in wanted if c is not None))


@dataclass(frozen=True, slots=True)
class FitSettings:
    """The settings every analysis of a fit shares (``[fit]`` in the configuration).

    Checked when built (:data:`jurymeter.analyses.commands.FIT_SETTINGS_RULES`):
    an :class:`~jurymeter.analyses.commands.OptionError` names the field, which the
    configuration reader and the CLI rename to the key or flag the user wrote.
    """

    judges: tuple[str, ...] | None = None  # the judge universe (None = every judge)
    systems: tuple[str, ...] | None = None  # the system population (None = every system)
    n_boot: int = 800
    seed: int = 0
    target: float = 0.8
    generations: str = "average"
    interval: str = "pivotal"

    def __post_init__(self) -> None:
        from jurymeter.analyses.commands import FIT_SETTINGS_RULES, check

        check(self, FIT_SETTINGS_RULES)


@dataclass(frozen=True, slots=True)
class HeadlineContext:
    """What a headline sentence may need beyond an analysis's own summary entry."""

    scale: tuple[float, float] | None = None  # the run's declared score range (``scale`` in the configuration)

    def points(self) -> str:
        """The unit of a score difference: "points (1-10 scale)" when the scale is declared, else "points"."""
        if self.scale is None:
            return "points"
        low, high = (f"{v:g}" for v in self.scale)
        return f"points ({low}-{high} scale)"


@dataclass(frozen=True, slots=True)
class ItemSet:
    """What planning knows of an item set before any fit: its protocol and name."""

    protocol: str
    name: str


@dataclass(frozen=True, slots=True)
class FitScope:
    """What one fit reads: its records (universe and population applied) and the metadata tables.

    Built by the pipeline where the fit runs (:func:`jurymeter.pipeline.fit.fit_scope`):
    an analysis does no I/O of its own. The records are a lazy scan of the
    store, so an analysis that reads them pushes its projection and filters down.
    """

    item_set: str
    protocol: str
    records: pl.LazyFrame
    systems: pl.DataFrame  # the systems metadata table (may be empty)
    judges: pl.DataFrame  # the judges metadata table (may be empty)
    settings: FitSettings
    # Per judge, in the fit's protocol: judgments stored and judgments the log adapters quarantined as the
    # judge's failures (``jurymeter.io.info.judge_health``); read only when an analysis
    # of the fit sets ``reads_judge_health``, else None.
    judge_health: pl.DataFrame | None = None
    # ``mapper(function, tasks)`` -> results in order: how a fit spreads independent work
    # (bootstrap refits) over workers. The builtin ``map`` runs them here; the pipeline
    # passes a Dask client's map when the fit runs on a cluster (``pipeline.fit.fit_mapper``).
    mapper: Mapper = map


class Fitting(Protocol[Result_co]):
    """An analysis's fit in progress: fed its blocks' chunks, then finished into a result."""

    def feeds(self) -> Mapping[GenerationMode, Callable[[np.ndarray], object]]:
        """Where each block's chunks go (an empty mapping: the fitting reads no block)."""
        ...

    def finish(self) -> Result_co:
        """The frozen result, once every chunk was fed."""
        ...


class FitPart(ABC, Generic[Result, Options]):
    """The statistics of an analysis: which item sets and blocks it reads, and how a fit becomes its typed result.

    What planning (:mod:`jurymeter.pipeline.jobs`) and the fit
    (:mod:`jurymeter.pipeline.fit`) read; nothing here knows of tables, pages or commands.

    Class attributes
    ----------------
    protocols : tuple of str
        Record protocols whose item sets it can fit (``"pointwise"``, ``"pairwise"``).
    compute_modules : tuple of str
        Heavy modules the fit itself imports (no figures): the pipeline imports them in a
        thread while it reads the fit's records (:func:`jurymeter.pipeline.fit.run_fit`).
    record_columns : tuple of str
        Stored columns outside the protocol's schema the fit reads with its records
        (an adapter's provenance such as AlpacaEval's ``order_known``; null where a part lacks them).
    reads_judge_health : bool
        The fit reads the store's judge health (:attr:`FitScope.judge_health`): its
        inputs then include the committed quarantine, so a new failure refits it.
    by_default : bool
        A nightly run fits it when ``[fit] analyses`` is empty. ``False`` for an analysis
        too costly to run on every item set every night (the latent-scale G-study): it
        runs when ``[fit] analyses`` names it or the configuration has its ``[fit.<name>]``
        table, and its command runs it whenever asked.
    """

    name: ClassVar[str]
    protocols: ClassVar[tuple[str, ...]] = ("pointwise",)
    compute_modules: ClassVar[tuple[str, ...]] = ()
    record_columns: ClassVar[tuple[str, ...]] = ()
    reads_judge_health: ClassVar[bool] = False
    by_default: ClassVar[bool] = True

    def applies(self, item_set: ItemSet) -> str | None:
        """``None`` when the analysis can fit this item set; else why not (said once by the run)."""
        if item_set.protocol not in self.protocols:
            return f"{self.name} fits {' or '.join(self.protocols)} item sets, not {item_set.protocol}"
        return None

    def modes(self, settings: FitSettings, options: Options) -> tuple[GenerationMode, ...]:
        """The blocks (generation modes) of the fit's records this analysis is fed."""
        return ()

    @abstractmethod
    def start(
        self, scope: FitScope, chunked: FitChunks | None, options: Options
    ) -> Fitting[Result]:
        """Begin one fit: decide what to read from ``chunked`` (the fit's blocks, when asked for)."""


class TablesPart(ABC, Generic[Result]):
    """The tidy tables of an analysis: their schemas and one fit's rows (:mod:`jurymeter.pipeline.tables`).

    Class attributes
    ----------------
    tables : tuple of Table
        Every table it publishes (names unique across the registry).
    """

    name: ClassVar[str]
    tables: ClassVar[tuple[Table, ...]]

    @abstractmethod
    def tabulate(self, result: Result) -> dict[str, list[dict[str, Any]]]:
        """Rows of each of :attr:`tables` (without the fit's names), by table name."""

    def table(self, name: str) -> Table:
        for table in self.tables:
            if table.name == name:
                return table
        msg = f"{self.name} has no table {name!r}"
        raise KeyError(msg)


class SummaryPart(ABC, Generic[Result]):
    """What a fit's result says in words and JSON: its report, its summary entry, its headline clause.

    Read by the fit's JSON and the run summary (:mod:`jurymeter.pipeline.fit`),
    the headlines (:mod:`jurymeter.analyses.headlines`) and the run history
    (:mod:`jurymeter.pipeline.history`).

    Class attributes
    ----------------
    headline : tuple of Headline
        The keys of :meth:`summarize`, in order.
    tracked : tuple of Tracked
        The numbers the run history follows across published runs (may be empty).
    """

    headline: ClassVar[tuple[Headline, ...]]
    tracked: ClassVar[tuple[Tracked, ...]] = ()

    @abstractmethod
    def report(self, result: Result) -> dict[str, Any]:
        """The result as JSON-ready data (``fits/<key>.json`` and the command's ``--json``)."""

    @abstractmethod
    def summarize(self, result: Result) -> Mapping[str, Any]:
        """Headline numbers: exactly the keys of :attr:`headline`, JSON-ready (null when not estimable).

        A mapping, so that an analysis may type it (a TypedDict of its headline keys).
        """

    def sentence(self, part: Mapping[str, Any], context: HeadlineContext) -> str | None:
        """This analysis's clause of a fit's headline (the index page, ``jurymeter run``'s last lines).

        Built from ``part`` (its summary entry: the keys of :attr:`headline`,
        the same numbers as the fit's JSON) and said in words and units, e.g.
        "MDD 0.46 points (1-10 scale)"; ``None`` when it has nothing to say.
        """
        return None


class SectionPart(ABC):
    """An analysis's section of a fit's report page and its figures (:mod:`jurymeter.pipeline.page`).

    Class attributes
    ----------------
    title : str
        Heading of its report section.
    figure_modules : tuple of str
        Heavy modules a fit imports to draw its figures (preloaded by workers).
    """

    title: ClassVar[str]
    figure_modules: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def section(self, page: SectionBuilder) -> None:
        """Write this analysis's part of one fit's report section (tables from ``page.rows``)."""


class Analysis(FitPart[Result, Options], TablesPart[Result], SummaryPart[Result], SectionPart):
    """One analysis of a fit: its parts composed, under one name.

    An analysis is a class that inherits one implementation of each part
    (:class:`FitPart`, :class:`TablesPart`, :class:`SummaryPart`,
    :class:`SectionPart`, and its command) and sets its identity; a small one
    implements them all in one class, a large one composes part classes kept in
    their own modules (``analyses/gstudy/``). Each reader of the registry uses
    one part, so a change to a part's methods touches that part only, and a new
    method with a default touches no analysis.

    Class attributes
    ----------------
    name : str
        Registry key, summary key, CLI command name (letters, digits, ``_``).
    title : str
        Heading of its report section.
    order : int
        Position of its section on the report page and of its columns in the Fits tables.
    options_type : type
        A frozen dataclass of the analysis's own options (``[fit.<name>]``, or
        its CLI command's flags), every field with a default; what each field
        admits is its command's :class:`~jurymeter.analyses.commands.Flag` rule.
    command : str or None
        ``"module:ATTRIBUTE"`` of its :class:`~jurymeter.analyses.commands.Command`
        (the CLI builds the typer command from it; the analysis never imports the CLI).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    order: ClassVar[int] = 100
    options_type: type[Options]  # set on the class: a ClassVar cannot name the type variable

    # Its command, as data: "module:ATTRIBUTE" of a jurymeter.analyses.commands.Command,
    # imported only by the CLI (so the analysis imports neither its command nor the CLI);
    # None: no command of its own.
    command: ClassVar[str | None] = None

    # ------------------------------------------------------------ helpers

    def default_options(self) -> Options:
        """Its options record with every field at its default."""
        return self.options_type()


def dropped_line(headline: Sequence[Headline], part: Mapping[str, Any]) -> str | None:
    """What an analysis's summary entry says a fit left out: its ``dropped_*`` headlines, or ``None``.

    Counts that are not zero (``systems dropped 1``), then texts (``systems not
    on the leaderboard: s4``); ``None`` when the entry says nothing was dropped.
    The page (notes under the Fits tables) and the run's printout both say it.
    """
    said = [(h, part.get(h.key)) for h in headline if h.key.startswith("dropped_")]
    counts = [f"{h.label} {v:,}" for h, v in said if h.kind == "count" and v]
    if not counts:
        return None
    texts = [f"{h.label}: {v}" for h, v in said if h.kind == "text" and v]
    return "; ".join([", ".join(counts), *texts])


# What a null number says when its part gave no reason of its own (the reports' ``null_reasons``).
NOT_ESTIMABLE = "not estimable on these data"


def headline_why(part: Mapping[str, Any], key: str) -> tuple[str, str] | None:
    """Why a Fits-table headline has no number: ``(cell word, reason)``, or ``None`` when it has one.

    An analysis that did not run on the fit (status ``skipped``) gives ``("not run", its reason)``;
    a fitted one whose ``<key>`` is null gives ``("not estimable", <key>_reason)`` when the
    analysis declares that reason (the pairwise and G-study parts do). The page (a cell's title)
    and the run's printout (a line under its table) say the same words: a missing number says why.
    """
    if part.get("status") == "skipped":
        return "not run", str(part.get("reason") or "the analysis was skipped")
    if part.get(key) is not None:
        return None
    why = part.get(f"{key}_reason")
    return ("not estimable", str(why)) if why else None
