"""The ``jurymeter`` command line (typer + rich): the app, its commands, and every registered analysis's own.

Each command lives in the module of its responsibility (``ingest``, ``store``,
``quarantine``, ``plans``, ``run``; the analyses' commands are built from their
declarations by :mod:`jurymeter.cli.analyses`); this module puts them on one app.

Every :class:`~jurymeter.errors.JurymeterError` becomes one line on stderr and a
non-zero exit status: 1 for a fatal problem (missing source, unreadable or full
store: nothing of the source being ingested is committed; a flag or configuration
value outside what it admits, named as the user wrote it), 3 when ``--strict``
rejected a source, 4 when ``jurymeter run`` published a run in which some fits
failed, 5 when ``ingest`` stored no judgment of a source (all quarantined), 6
when some sources could not be read (each named on stderr with its reason)
and the rest were ingested (``ingest``), or, with no fit failed, published
(``run``: the sources are alerts of the run), 7 when a gate failed (``check``, or
``[gates]`` at the end of a ``run`` that had no other failure). Other exceptions are bugs and
keep their traceback.
"""

from __future__ import annotations

import gc
import sys

import typer

from jurymeter.cli import check, ingest, plans, quarantine, run, store
from jurymeter.cli.analyses import add_analysis_commands
from jurymeter.render.text import glossary_help

app = typer.Typer(
    help="How far to trust a leaderboard scored by LLM judges.",
    epilog=glossary_help(),  # the symbols the pages and the commands print, explained once
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
store_app = typer.Typer(help="Inspect a judgment store.", no_args_is_help=True)
app.add_typer(store_app, name="store")
app.command()(ingest.ingest)
store_app.command("info")(store.store_info_cmd)
app.command()(quarantine.quarantine)
app.command()(plans.plan)
app.command()(plans.simulate)
app.command()(run.run)
app.command()(run.report)
app.command()(run.demo)
app.command()(check.check)
add_analysis_commands(app)  # each registered analysis's command (gstudy, cyclic, ...), from its declaration
app.command(name="batch-plan")(plans.batch_plan_command)


# The cyclic garbage collector's thresholds in a command's process. A command's
# imports make most of its objects (scipy's alone hundreds of thousands) and keep
# them to the end; at Python's default (700) the collector traversed them again
# and again: 265 collections, 0.08 s, while one `jurymeter gstudy` imported its fit's
# modules; at 10,000 a few, a third of that time. (The CLI's own imports, before
# this runs, cost 0.01 s of collections.)
GC_THRESHOLDS = (10_000, 10, 10)


def main() -> None:  # pragma: no cover - console entry point
    # Piped (CI, a scheduler's log), stdout is block-buffered: a run's lines
    # would arrive all at once at the end. Line buffering shows them as they happen.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # typeshed: TextIO; a console script's stdout is an io.TextIOWrapper
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        app()
    finally:
        # The interpreter's exit collects every object once more (0.09 s after a
        # G-study, most of it scipy's modules); frozen, the collector skips them
        # and the process's end frees them. atexit handlers still run; no command
        # leaves a file to be closed by that collection (stdout and stderr are
        # flushed by the interpreter).
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    main()
