"""The ``jurymeter`` command line (typer + rich): options, printing, exit codes."""

from jurymeter.cli.app import app, main

__all__ = ["app", "main"]
