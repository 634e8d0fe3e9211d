"""Validated parameters with knob metadata: the one definition every surface is derived from.

A parameter class is a frozen dataclass deriving from ``Params`` whose fields are declared
with ``number``, ``integer``, ``flag`` or ``choice``. Each declaration carries a ``Knob``:
label, help text, the range a slider offers (``lo``–``hi`` by ``step``), the hard bounds
construction enforces (``min``/``max``), and whether a sweep may vary it. Construction
validates every field — wrong types, booleans given as numbers, NaN, ±inf and values out of
bounds raise ``ValueError`` naming the field — so a bad value is refused where it is
defined, whether it came from TOML, ``--param``, a page or code.

Each declaration also names its ``group`` (``GROUPS``: a weight, a confidence or vitality
factor, a limit), so a page places a knob by what its owner says it is, never by its name;
``curve`` marks the parameter whose own one-dimensional curve the Sweep page offers. A class
declares what is allowed but worth a word in ``warnings()`` (``walk_warnings`` collects them
with their owner's path), so a page shows a warning without knowing any parameter's name.
The Tune knobs, the Sweep axes, ``--param``, ``rwb pipelines`` and the TOML schema all walk
these declarations (``walk_knobs``); nothing keeps a second list of parameters.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any, Iterator



GROUPS = ("fusion", "weights", "confidence", "vitality", "limits")
"""What a knob acts on: the fusion's own shape, a weight of one of its terms, the confidence or
vitality factors (seed 001's F_conf, F_vit), or the limits applied after scoring."""


ENGINE_WRITES = "every engine writes it"
"""A knob's ``engine`` declaration: every engine an export targets takes any value as written
(the result count, the per-path depth). The other declaration is a tuple of the values every
engine's plain hybrid query runs (the "off" values: ``(None,)``, ``(False,)``, ``("any",)``);
any other value is a stage an exporter runs only if it says so (``eval.export``: ``name`` for
a number or flag, ``name=value`` for a choice). A knob without one (``None``) is refused by every
exporter, so a stage added without saying how engines run it never exports silently."""


@dataclass(frozen=True)
class Knob:
    """How a parameter is shown, bounded and swept."""

    kind: str
    label: str
    help: str = ""
    lo: float | None = None        # slider range
    hi: float | None = None
    step: float | None = None
    min: float | None = None       # hard bounds, inclusive unless ``min_exclusive``
    max: float | None = None
    min_exclusive: bool = False
    options: tuple[str, ...] = ()
    sweepable: bool = True
    optional: bool = False         # None allowed (means "off")
    group: str = "fusion"          # where a page shows it (``GROUPS``), declared by its owner
    curve: bool = False            # the Sweep page offers its own curve over lo–hi by step
    engine: tuple | str | None = None  # what an engine must support to run a value (``ENGINE_WRITES``)

    def __post_init__(self):
        if self.group not in GROUPS:
            raise ValueError(f"knob group must be one of {list(GROUPS)}, got {self.group!r}")

    def bounds_text(self) -> str:
        low = "" if self.min is None else (f"> {self.min:g}" if self.min_exclusive else f"≥ {self.min:g}")
        high = "" if self.max is None else f"≤ {self.max:g}"
        return " and ".join(p for p in (low, high) if p)

    def check(self, name: str, value: Any) -> Any:
        """The validated (and normalised: int → float for floats) value, or ``ValueError``."""
        if value is None:
            if self.optional:
                return None
            raise ValueError(f"{name} is required")
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value!r}")
            return value
        if self.kind == "choice":
            if not isinstance(value, str) or value not in self.options:
                raise ValueError(f"{name} must be one of {list(self.options)}, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            what = "an integer" if self.kind == "int" else "a number"
            raise ValueError(f"{name} must be {what}, got {value!r}")
        if self.kind == "int":
            if isinstance(value, float):
                if not value.is_integer():
                    raise ValueError(f"{name} must be an integer, got {value!r}")
                value = int(value)
        else:
            if not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
            value = float(value)
        too_low = self.min is not None and (value <= self.min if self.min_exclusive else value < self.min)
        too_high = self.max is not None and value > self.max
        if too_low or too_high:
            raise ValueError(f"{name} must be {self.bounds_text()}, got {value!r}")
        return value


def _declare(default, knob: Knob):
    return field(default=default, metadata={"knob": knob})


def number(default: float | None, label: str, help: str = "", *, lo=None, hi=None, step=None, min=None, max=None,
           min_exclusive=False, sweepable=True, optional=False, group="fusion", curve=False, engine=None):
    """A float parameter (finite; ``min``/``max`` enforced)."""
    return _declare(default, Knob("float", label, help, lo, hi, step, min, max, min_exclusive, (), sweepable,
                                  optional or default is None, group, curve, engine))


def integer(default: int | None, label: str, help: str = "", *, lo=None, hi=None, step=1, min=None, max=None,
            sweepable=True, optional=False, group="fusion", engine=None):
    """An integer parameter (a float with an integral value is accepted; booleans are not)."""
    return _declare(default, Knob("int", label, help, lo, hi, step, min, max, False, (), sweepable,
                                  optional or default is None, group, engine=engine))


def flag(default: bool, label: str, help: str = "", *, group="fusion", engine=None):
    """A boolean parameter (only ``true``/``false``: the string "false" is refused)."""
    return _declare(default, Knob("bool", label, help, sweepable=False, group=group, engine=engine))


def choice(default: str, options: tuple[str, ...], label: str, help: str = "", *, group="fusion", engine=None):
    """One of a fixed set of strings."""
    return _declare(default, Knob("choice", label, help, options=tuple(options), sweepable=False, group=group,
                                  engine=engine))


def read_from(default: str = ""):
    """A field saying where the parameters were read from (the folder of their TOML, which a file
    they name is relative to): part of their identity (equality, hash), so the same text read in
    two folders is two configurations, but no parameter: never written to a table (``plain``),
    never read from one (``build`` refuses it as an unknown key), never a knob."""
    return field(default=default, metadata={"read_from": True})


def read_from_field(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("read_from"))


def knob_of(f: dataclasses.Field) -> Knob | None:
    return f.metadata.get("knob")


def declared(cls: type) -> tuple[tuple[str, "Knob"], ...]:
    """``(name, knob)`` of each declared parameter of a ``Params`` class, in field order."""
    return _declared(cls)


@functools.lru_cache(maxsize=None)
def _declared(cls: type) -> tuple[tuple[str, "Knob"], ...]:
    """``(name, knob)`` of each declared parameter of a ``Params`` class, looked up once."""
    return tuple((f.name, knob_of(f)) for f in dataclasses.fields(cls) if knob_of(f) is not None)


@dataclass(frozen=True)
class Params:
    """Base of every parameter class: validates declared fields at construction.

    Subclasses add cross-field rules in ``check()`` and may hide fields a configuration
    does not use from knobs and sweeps with ``active(name)``."""

    def __post_init__(self):
        for name, knob in _declared(type(self)):
            object.__setattr__(self, name, knob.check(name, getattr(self, name)))
        self.check()

    def check(self) -> None:
        """Cross-field rules (raise ``ValueError``)."""

    def active(self, name: str) -> bool:
        """Whether field ``name`` changes anything in this configuration."""
        return True

    def warnings(self) -> tuple[tuple[str, str], ...]:
        """``(group, text)`` for each setting allowed but worth a word (a less trusted band
        weighted above a more trusted one, say): the owner says what runs against its own
        formula, and a page shows the text beside that group's knobs (``walk_warnings``)."""
        return ()


@dataclass(frozen=True)
class KnobRef:
    """One parameter of a concrete configuration: where it is, how it is shown, its value."""

    path: str
    knob: Knob
    value: Any


def _walk(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(prefix, params)`` on entering each ``Params`` under ``obj`` and ``(path, KnobRef)`` for
    each active declared parameter, in field order: the one walk of a parameter tree.

    Nested ``Params`` fields are entered; a tuple of named ``Params`` (profiles) is entered
    by each element's ``name``."""
    if isinstance(obj, tuple):
        for item in obj:
            yield from _walk(item, f"{prefix}{item.name}.")
        return
    if not isinstance(obj, Params):
        return
    yield prefix, obj
    for f in dataclasses.fields(obj):
        if not obj.active(f.name):
            continue
        value = getattr(obj, f.name)
        knob = knob_of(f)
        if knob is not None:
            yield f"{prefix}{f.name}", KnobRef(f"{prefix}{f.name}", knob, value)
        elif isinstance(value, (Params, tuple)):
            yield from _walk(value, f"{prefix}{f.name}.")


def walk_knobs(obj: Any, prefix: str = "") -> Iterator[KnobRef]:
    """Every active declared parameter under ``obj``, by dotted path."""
    return (item for _, item in _walk(obj, prefix) if isinstance(item, KnobRef))


@dataclass(frozen=True)
class ParamWarning:
    """A warning declared by a ``Params`` owner (``Params.warnings``): the owner's dotted path
    (its knobs are ``<path>.<field>``), the group of the knobs it concerns, and its text."""

    path: str
    group: str
    text: str


def walk_owners(obj: Any, prefix: str = "") -> Iterator[tuple[str, "Params"]]:
    """``(path, params)`` of ``obj`` and of every ``Params`` nested under it: the owners of the
    parameters ``walk_knobs`` lists as ``<path>.<field>``."""
    return ((where.rstrip("."), item) for where, item in _walk(obj, prefix) if isinstance(item, Params))


def walk_warnings(obj: Any, prefix: str = "") -> Iterator[ParamWarning]:
    """Every warning of ``obj`` and of the parameters nested under it, by the path
    ``walk_owners`` gives their owner."""
    for where, owner in walk_owners(obj, prefix):
        for group, text in owner.warnings():
            yield ParamWarning(where, group, text)


def build(cls: type, data: Any, base: Any, where: str, nested: dict[str, Any] | None = None):
    """``cls`` from a table, starting from ``base`` (or the class defaults).

    ``nested`` maps a field name to a function ``(raw, current, where) -> value`` for
    fields that are not plain declared parameters. Unknown keys are refused, listing the
    allowed ones; every value is validated by the class."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a table, got {type(data).__name__}")
    names = {f.name: f for f in dataclasses.fields(cls) if not read_from_field(f)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(names)}")
    values = {}
    for name in names:
        if name in data:
            current = getattr(base, name) if base is not None else None
            if nested and name in nested:
                values[name] = nested[name](data[name], current, f"{where}.{name}")
            else:
                values[name] = data[name]
        elif base is not None:
            values[name] = getattr(base, name)
    try:
        return cls(**values)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    except TypeError as error:  # a required field missing
        raise ValueError(f"{where}: {error}") from None


def same(a: Any, b: Any) -> bool:
    """The one equality of parameter values: the same type and ``==``, exact for floats too.

    Every "what changed" is rebuilt into a configuration (a saved profile's TOML relative to its
    base, Tune's link, an export), so a tolerance would report as unchanged a value that saving
    then loading changes; values are validated at construction (no NaN), so ``==`` is total."""
    return type(a) is type(b) and a == b


def plain(obj: Any, base: Any = None) -> Any:
    """A TOML-ready table of ``obj``: None values and where it was read from (``read_from``)
    left out; with ``base``, only the fields that differ from it (``same``; nested tables
    likewise)."""
    if isinstance(obj, Params):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if value is None or read_from_field(f):
                continue
            other = getattr(base, f.name, None) if base is not None else None
            if base is not None and same(value, other) and f.name != "name":
                continue
            out[f.name] = plain(value, other if isinstance(value, Params) else None)
        return out
    if isinstance(obj, tuple):
        return [plain(v) for v in obj]
    return obj
