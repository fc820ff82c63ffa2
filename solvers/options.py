"""Options objects: an engine's tunables as a frozen dataclass, validated once, documented from its fields.

Each field is declared with :func:`option`: its default, one line on what it trades, and the rule
its value must keep. :func:`validate` (called from the dataclass's ``__post_init__``) refuses a
value that breaks its rule with a :class:`~securelp.solvers.errors.ConfigError` that names the
field; :func:`options_table` renders the fields of several options classes as one markdown table
(docs/reference/options.md is generated from it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any

from securelp.solvers.errors import ConfigError

__all__ = ["at_least", "boolean", "fraction", "nested", "non_negative", "option", "options_table", "positive", "positive_int",
           "tuple_of", "validate"]

Check = tuple[Callable[[Any], bool], str]


def _real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def boolean() -> Check:
    """True or False."""
    return (lambda v: isinstance(v, bool)), "True or False"


def positive() -> Check:
    """A number > 0 (infinity allowed)."""
    return (lambda v: _real(v) and v > 0 and not math.isnan(v)), "a number > 0"


def non_negative() -> Check:
    """A number >= 0 (infinity allowed)."""
    return (lambda v: _real(v) and v >= 0), "a number >= 0"


def fraction(*, open_low: bool = False) -> Check:
    """A number in ``[0, 1]`` (``(0, 1]`` with ``open_low``)."""
    if open_low:
        return (lambda v: _real(v) and 0 < v <= 1), "a number in (0, 1]"
    return (lambda v: _real(v) and 0 <= v <= 1), "a number in [0, 1]"


def at_least(low: int) -> Check:
    """An integer >= ``low``."""
    return (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low), f"an integer >= {low}"


def positive_int() -> Check:
    """An integer >= 1."""
    return at_least(1)


def tuple_of(check: Check) -> Check:
    """A tuple (possibly empty) whose every entry passes ``check``."""
    predicate, rule = check
    return (lambda v: isinstance(v, tuple) and all(predicate(x) for x in v)), f"a tuple, each entry {rule}"


def option(default: Any, trades: str, check: Check | None = None) -> Any:
    """A dataclass field with ``default``, the one line ``trades`` (what the value trades, for the
    options table) and ``check`` (a predicate and the rule it states, for :func:`validate`)."""
    return dataclasses.field(default=default, metadata={"trades": trades, "check": check})


def nested(cls: type, trades: str) -> dict[str, Any]:
    """The metadata of a field holding another options object of class ``cls``
    (``field(default_factory=cls, metadata=nested(cls, trades))``): the one line ``trades`` for the
    options table, and the type check :func:`validate` applies."""
    article = "an" if cls.__name__[0] in "AEIOU" else "a"
    return {"trades": trades, "check": ((lambda v: isinstance(v, cls)), f"{article} {cls.__name__}")}


def validate(options: Any) -> None:
    """Check every field of the options object ``options`` against its rule.

    Raises
    ------
    ConfigError
        Naming the options class and the field, the rule and the value (``parameter``: the field).
    """
    for f in dataclasses.fields(options):
        check = f.metadata.get("check")
        if check is None:
            continue
        predicate, rule = check
        value = getattr(options, f.name)
        if not predicate(value):
            raise ConfigError(f"{type(options).__name__}.{f.name} must be {rule}, got {value!r}", parameter=f.name)


def _default_text(value: Any) -> str:
    """A default as the table shows it: ``1e8`` (not ``1e+08``), ``1,000,000``, tuples entry by entry."""
    if isinstance(value, tuple):
        return "(" + ", ".join(_default_text(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        mantissa, _, exponent = f"{value:g}".partition("e")
        return mantissa + (f"e{int(exponent)}" if exponent else "")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:,}"
    return repr(value)


def options_table(classes: Iterable[type]) -> str:
    """One markdown section per options class: its docstring's first line, then a table of its fields
    (name, default, the rule :func:`validate` holds it to, what it trades)."""
    out: list[str] = []
    for cls in classes:
        doc = (cls.__doc__ or "").strip().splitlines()
        out += [f"## `{cls.__module__}.{cls.__name__}`", "", doc[0] if doc else "", "",
                "| option | default | must be | what it trades |", "|---|---|---|---|"]
        for f in dataclasses.fields(cls):
            trades = f.metadata.get("trades", "").replace("|", "\\|")
            check = f.metadata.get("check")
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            shown = f"{type(default).__name__}()" if dataclasses.is_dataclass(default) else _default_text(default)
            rule = check[1] if check else ""
            out.append(f"| `{f.name}` | `{shown}` | {rule} | {trades} |")
        out.append("")
    return "\n".join(out)
