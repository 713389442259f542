"""Exception hierarchy: one base class, one subclass per kind of failure.

The CLI turns a :class:`JurymeterError` into a one-line message and an exit
status; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class JurymeterError(Exception):
    """Base class of every error jurymeter raises on purpose."""


class SourceError(JurymeterError):
    """A source named on the command line is missing or unreadable."""


class StoreError(JurymeterError):
    """The store cannot be opened, read or written."""


class StoreLockedError(StoreError):
    """Another ingest holds the store's write lock and did not release it in time."""


class StrictModeError(JurymeterError):
    """``--strict`` was given and at least one record went to quarantine."""


class ConfigError(JurymeterError):
    """An option or configuration value is invalid."""


class DesignError(JurymeterError):
    """A design specification or the data given for it is invalid."""


class OrchestrationError(JurymeterError):
    """The run's Prefect API or Dask cluster could not be started or reached."""


class SimulationError(JurymeterError, ValueError):
    """Invalid simulation parameters or an impossible fault request."""


class ReportError(JurymeterError):
    """A report cannot be rendered as asked (an unsafe figure kind, say)."""


class NotApplicableError(JurymeterError):
    """An analysis does not apply to the fit it was planned for; the fit goes on without it."""
