"""What an analysis's command is, as data, and what its options admit: the one place options are validated.

An analysis names its command declaration (:attr:`jurymeter.analyses.base.Analysis.command`,
``"module:ATTRIBUTE"`` of a :class:`Command`); the CLI (:mod:`jurymeter.cli.analyses`)
builds the typer command from it, and nothing here imports typer or the CLI. A
:class:`Flag` maps one command-line flag to one field of the analysis's options
record (``[fit.<name>]``) or of :class:`~jurymeter.analyses.base.FitSettings`
(``[fit]``); its default is the field's default, never restated.

Validation: a :class:`Rule` says what one field admits (choices, a range). A
record is checked by :func:`check`, which raises :class:`OptionError` naming the
field; whoever built the record from what the user wrote (the configuration
reader, the CLI) renames the field to the key or flag the user wrote
(:meth:`OptionError.named`): ``--boot must be at least 1, got 0``, ``c.toml
[fit.pairwise] n_boot must be at least 1, got 0``.
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jurymeter.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

# The choices of the shared settings, written once. ``jurymeter.stats.reliability``
# refuses the same (GENERATION_MODES, INTERVAL_METHODS there; tests/test_user_errors.py
# checks they agree): this module stays light, planning imports it.
GENERATION_MODES: tuple[str, ...] = ("average", "facet")
INTERVAL_METHODS: tuple[str, ...] = ("pivotal", "percentile")


@dataclass(frozen=True, slots=True)
class Rule:
    """What one field of an options record admits: one of ``choices``, or a number in a range.

    ``low``/``high`` are inclusive bounds unless ``open`` (then both are exclusive).
    ``integer``: the value must be an int (a bool is not one).
    """

    choices: tuple[str, ...] | None = None
    low: float | None = None
    high: float | None = None
    open: bool = False
    integer: bool = False

    def allowed(self) -> str:
        """What the rule admits, in words (the error's second half)."""
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        if self.low is not None and self.high is not None:
            if self.integer:
                return f"an integer from {self.low:g} to {self.high:g}"
            return f"in ({self.low:g}, {self.high:g})" if self.open else f"in [{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"above {self.low:g}" if self.open else f"at least {self.low:g}"
        if self.high is not None:
            return f"below {self.high:g}" if self.open else f"at most {self.high:g}"
        return "an integer" if self.integer else "a number"

    def admits(self, value: object) -> bool:
        if self.choices is not None:
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if self.low is not None and (value <= self.low if self.open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.open else value > self.high))


class OptionError(ConfigError):
    """A field of an options record that its :class:`Rule` does not admit.

    The message names the field; :meth:`named` says it again with the name the
    user wrote (a flag, a configuration key).
    """

    def __init__(self, field: str, allowed: str, value: object) -> None:
        self.field, self.allowed, self.value = field, allowed, value
        super().__init__(f"{field} must be {allowed}, got {value!r}")

    def named(self, name: str) -> ConfigError:
        """The same error, the field called ``name`` (``--boot``, ``c.toml [fit] n_boot``)."""
        return ConfigError(f"{name} must be {self.allowed}, got {self.value!r}")


def check(record: object, rules: Mapping[str, Rule]) -> None:
    """Raise :class:`OptionError` for the first field of ``record`` its rule does not admit."""
    for field, rule in rules.items():
        value = getattr(record, field)
        if not rule.admits(value):
            raise OptionError(field, rule.allowed(), value)


# What FitSettings' fields admit ([fit] in the configuration; --boot, --seed, ... of a command).
FIT_SETTINGS_RULES: Mapping[str, Rule] = {
    "n_boot": Rule(low=1, integer=True),
    "seed": Rule(low=0, integer=True),
    "target": Rule(low=0, high=1, open=True),
    "generations": Rule(choices=GENERATION_MODES),
    "interval": Rule(choices=INTERVAL_METHODS),
}


@dataclass(frozen=True, slots=True)
class Flag:
    """One flag of an analysis's command: a field of its options record, or of FitSettings.

    Attributes
    ----------
    field : str
        The field it sets (of the analysis's options type; of ``FitSettings`` with ``settings``).
    flag : str
        As the user types it (``"--boot"``).
    help : str
        The flag's help text (its default is said from the field's default).
    rule : Rule or None
        What the field admits (``None``: anything of its type).
    settings : bool
        A ``FitSettings`` field (``[fit]``) rather than the analysis's own (``[fit.<name>]``).
    parse : callable or None
        Text to the field's value (``"5,10,20"`` to ``(5, 10, 20)``); the flag is then a string.
    """

    field: str
    flag: str
    help: str
    rule: Rule | None = None
    settings: bool = False
    parse: Callable[[str], Any] | None = None


@dataclass(frozen=True, slots=True)
class Output:
    """A flag naming a file the command writes from the report (``--screened-out``)."""

    flag: str
    help: str
    write: Callable[[Mapping[str, Any], Path], None]


@dataclass(frozen=True, slots=True)
class Command:
    """An analysis's command, as data: the CLI builds the typer command from it.

    Attributes
    ----------
    help : str
        The command's help (its first line is the summary ``jurymeter --help`` lists).
    item_set_help : str
        The ``--item-set`` flag's help.
    flags : tuple of Flag
        Its own flags, in ``--help`` order (every command also takes ``--item-set``,
        ``--store``, ``--storage-option``, ``--config``, ``--universe``,
        ``--population`` and ``--json``).
    title : str
        The analysis as an error names it (``"the G-study cannot run on ..."``).
    show : callable or None
        Prints the report (with the fit's names) for a terminal.
    outputs : tuple of Output
        Files the command may write from the report.
    names : tuple of str
        The fit's names added to the report (``item_set``, ``universe``, ``population``).
    notes : bool
        Its printout folds the fit's notes into a count (``render.text.print_notes``): the command
        then takes ``--verbose``, which lists them; a command without notes has no such flag.
    """

    help: str
    item_set_help: str
    flags: tuple[Flag, ...]
    title: str
    show: Callable[[dict[str, Any]], None] | None = None
    outputs: tuple[Output, ...] = ()
    names: tuple[str, ...] = ("item_set",)
    notes: bool = False

    def option_rules(self) -> dict[str, Rule]:
        """What each field of the analysis's own options admits (its flags' rules; ``FitSettings`` has its own)."""
        return {f.field: f.rule for f in self.flags if not f.settings and f.rule is not None}


def command_of(spec: str | None) -> Command | None:
    """The :class:`Command` that ``"module:ATTRIBUTE"`` names (imported now), or ``None``."""
    if spec is None:
        return None
    module, _, attribute = spec.partition(":")
    command = getattr(importlib.import_module(module), attribute)
    if not isinstance(command, Command):
        msg = f"{spec} is not a jurymeter.analyses.commands.Command"
        raise TypeError(msg)
    return command


def field_kind(record_type: type, field: str) -> type:
    """The Python type of a field of a dataclass of options: ``int``, ``float``, ``str``, ``bool`` or ``tuple``.

    ``X | None`` is ``X``; the field's default says it where the annotation cannot be resolved.
    """
    found = {f.name: f for f in dataclasses.fields(record_type)}
    try:
        hint: Any = typing.get_type_hints(record_type)[field]
    except (NameError, TypeError, KeyError):
        default = found[field].default
        return type(default) if default is not None else str
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin is tuple:
        return tuple
    if args and origin is not typing.Literal:  # X | None
        inner = args[0]
        return tuple if typing.get_origin(inner) is tuple else inner if isinstance(inner, type) else str
    if origin is typing.Literal:
        return type(args[0]) if args else str
    return hint if isinstance(hint, type) else str


def tuple_of_ints(record_type: type, field: str) -> bool:
    """Whether a tuple-valued field holds integers (``budgets``), not names."""
    try:
        hint: Any = typing.get_type_hints(record_type)[field]
    except (NameError, TypeError, KeyError):
        return False
    for part in (hint, *typing.get_args(hint)):
        if typing.get_origin(part) is tuple:
            return int in typing.get_args(part)
    return False


def build(record_type: type, values: Mapping[str, Any], rules: Mapping[str, Rule],
          name_of: Callable[[str], str]) -> Any:
    """``record_type(**values)`` checked against ``rules``; an error names the field as ``name_of`` says.

    The one way options records are built from what a user wrote (the configuration
    reader and the CLI both come here): an error is one :class:`ConfigError` line naming
    the flag or key and what is allowed.
    """
    for field, rule in rules.items():
        if field in values and not rule.admits(values[field]):
            raise OptionError(field, rule.allowed(), values[field]).named(name_of(field))
    try:
        record = record_type(**values)
    except OptionError as exc:
        raise exc.named(name_of(exc.field)) from None
    try:
        check(record, rules)
    except OptionError as exc:
        raise exc.named(name_of(exc.field)) from None
    return record
