"""One configuration system for every ``calver`` command (torch-free).

A command's settings are dataclasses whose fields carry ``metadata={"help": ...}`` (:func:`cfg_field`).
:func:`parse` reads them in one order: field defaults, then ``base`` (e.g. ``calver demo --quick``),
then a YAML file (``yaml.safe_load``), then ``--field value`` flags (built from
:func:`dataclasses.fields`), then keyword overrides from Python. An unknown key or flag is a
:class:`ConfigError` naming it and the closest known field; a bad value is a ConfigError naming the
field. ``calver train`` reads TRL's dataclasses through ``trl.TrlParser``
(:func:`calver.train.common.parse_config`) and raises the same error type.

Flags, on every command: ``--field value`` with the field's underscore name; list fields take several
values (``--seeds 0 1 2``); booleans take ``true``/``false`` (a bare ``--flag`` is true; ``--no_field``
turns off a field that defaults to true); ``null`` unsets an optional field; mapping fields take YAML
(``--sampler_kwargs '{max_model_len: 2048}'``). Kebab spellings (``--n-nodes``) are hidden aliases.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import types as _types
import typing
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

MISSING = dataclasses.MISSING


class ConfigError(ValueError):
    """A configuration key or value is invalid; the message names the field. The one config error of calver."""


def cfg_field(default: Any = MISSING, *, help: str, aliases: Sequence[str] = (), key: bool = True,
              default_factory: Any = MISSING, **kw: Any) -> Any:
    """A dataclass field with help text. ``aliases``: other accepted key / flag names; ``key=False``: not a
    config key (the caller fills it, e.g. a nested config). Mutable defaults are copied per instance."""
    metadata = {"help": help, "aliases": tuple(aliases), "key": key}
    if default_factory is MISSING and isinstance(default, (list, dict, set)):
        default_factory, default = (lambda d=default: copy.deepcopy(d)), MISSING
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata, **kw)
    return dataclasses.field(default=default, metadata=metadata, **kw)


# ---- keys --------------------------------------------------------------------------------------------
def closest(name: str, known: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(str(name), sorted(known), n=1)
    return close[0] if close else None


def key_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("key", True)]


def field_names(types: Sequence[type]) -> set[str]:
    return {f.name for t in types for f in key_fields(t)}


def check_keys(keys: Iterable[Any], known: Iterable[str], source: str, note: str = "") -> None:
    """Raise :class:`ConfigError` naming every key not in ``known``, each with its closest known field."""
    hints = unknown_key_hints(keys, known)
    if hints:
        raise ConfigError(f"unknown config field(s) in {source}: {', '.join(hints)}{note}")


def unknown_key_hints(keys: Iterable[Any], known: Iterable[str]) -> list[str]:
    """Each key not in ``known``, quoted and with its closest known name: ``'varient' (did you mean
    'variant'?)``. Shared by config keys and problem query keys (``TaskFamily.normalize_query``)."""
    known = set(known)
    hints = []
    for k in keys:
        if k not in known:
            close = closest(str(k), known)
            hints.append(f"{k!r}" + (f" (did you mean {close!r}?)" if close else ""))
    return hints


def check_config_keys(config: Mapping[str, Any], types: Sequence[type], source: str, extra: Iterable[str] = ()) -> None:
    """:func:`check_keys` against the fields of the dataclasses ``types`` (plus ``extra`` names)."""
    check_keys(config, field_names(types) | set(extra), source,
               f"; fields come from {', '.join(t.__name__ for t in types)}")


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML file (``yaml.safe_load``); a missing file, bad YAML or a non-mapping is a ConfigError."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {p} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise ConfigError(f"config file {p} cannot be read: {e.strerror or e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {p} is not valid YAML: {_yaml_error(e)}") from None
    except RecursionError:
        raise ConfigError(f"config file {p} is nested too deeply") from None
    except ValueError as e:  # e.g. an integer over CPython's digit limit
        raise ConfigError(f"config file {p} holds an unreadable value: {str(e).split(';')[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a YAML mapping of field: value, got {type(data).__name__}")
    return data


def _yaml_error(e: Exception) -> str:
    """A YAML error on one line: what was wrong and where (PyYAML's own text spans several lines)."""
    mark = getattr(e, "problem_mark", None)
    parts = [getattr(e, "context", None), getattr(e, "problem", None)]
    what = ": ".join(str(x) for x in parts if x) or str(e)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{what}{where}".split())


# ---- types -------------------------------------------------------------------------------------------
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _unoptional(hint: Any) -> tuple[Any, bool]:
    """(hint without ``None``, whether ``None`` was allowed)."""
    if typing.get_origin(hint) in (typing.Union, _types.UnionType):
        args = typing.get_args(hint)
        rest = [a for a in args if a is not type(None)]
        inner = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
        return inner, len(rest) < len(args)
    return hint, False


def _is_seq(hint: Any) -> bool:
    return hint in (list, tuple) or typing.get_origin(hint) in (list, tuple)


def _elem(hint: Any) -> Any:
    args = typing.get_args(hint)
    return args[0] if args else Any


def describe(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` (as YAML or Python gives it) fits the annotation ``hint``."""
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, _types.UnionType):
        return any(matches(value, a) for a in args)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if _is_seq(hint):
        if not isinstance(value, (list, tuple)):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(matches(v, a) for v, a in zip(value, args))
        return not args or all(matches(v, args[0]) for v in value)
    if hint is dict or origin is dict:
        return isinstance(value, dict)
    return isinstance(value, hint) if isinstance(hint, type) else True


def check_types(obj: Any) -> None:
    """Raise :class:`ConfigError` naming the first field of the dataclass ``obj`` whose value does not fit
    its annotation."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if not matches(value, hints[f.name]):
            raise ConfigError(f"field {f.name!r} must be {describe(hints[f.name])}, got {value!r}")


_NULL, _TRUE, _FALSE = {"null", "none", "~"}, {"true", "yes", "1", "on"}, {"false", "no", "0", "off"}


def from_text(name: str, raw: str | list[str], hint: Any) -> Any:
    """A command-line value (one string, or a list for a list field) converted to the field's type."""
    inner, optional = _unoptional(hint)
    if isinstance(raw, list):
        if optional and len(raw) == 1 and raw[0].strip().lower() in _NULL:
            return None
        if _is_seq(inner):
            return [from_text(name, r, _elem(inner)) for r in raw]
        raw = " ".join(raw)
    if optional and raw.strip().lower() in _NULL:
        return None
    low = raw.strip().lower()
    try:
        if inner is str:
            return raw
        if inner is bool:
            if low in _TRUE | _FALSE:
                return low in _TRUE
            raise ValueError(raw)
        if inner in (int, float):
            return inner(raw)
        import yaml

        return yaml.safe_load(raw)
    except Exception:  # noqa: BLE001 - int()/float()/YAML failures all mean the same to the user
        raise ConfigError(f"field {name!r}: cannot read {raw!r} as {describe(hint)}") from None


# ---- building ----------------------------------------------------------------------------------------
def build(cls: type, values: Mapping[str, Any], source: str = "the config", **fixed: Any) -> Any:
    """``cls(**values, **fixed)`` after rejecting unknown keys and naming missing required fields."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"a {cls.__name__} config must be a mapping of field: value, got {type(values).__name__}")
    fields = key_fields(cls)
    check_keys(values, {f.name for f in fields}, source, f"; fields come from {cls.__name__}")
    missing = [f.name for f in fields if f.name not in values and f.default is MISSING
               and f.default_factory is MISSING]
    if missing:
        what = f"field {missing[0]!r} is" if len(missing) == 1 else f"fields {', '.join(map(repr, missing))} are"
        raise ConfigError(f"{what} required (set it in the config file or pass --{missing[0]} VALUE)")
    return cls(**values, **fixed)


def _aliases(types: Sequence[type]) -> dict[str, str]:
    return {a: f.name for cls in types for f in key_fields(cls) for a in f.metadata.get("aliases", ())}


def _layer(data: Mapping[str, Any], types: Sequence[type], source: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source} must be a mapping of field: value, got {type(data).__name__}")
    aliases, out = _aliases(types), {}
    for key, value in data.items():
        name = aliases.get(key, key)
        if name in out:
            raise ConfigError(f"{source} gives field {name!r} twice (as {name!r} and as an alias); give one")
        out[name] = value
    check_config_keys(out, types, source)
    return out


def collect(types: Sequence[type], config: str | Path | None = None, args: Sequence[str] | argparse.Namespace = (),
            *, base: Mapping[str, Any] | None = None,
            overrides: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per type, its merged values: ``base``, the YAML file ``config``, the command line ``args`` (a list
    of ``--field value`` strings, or a namespace parsed by a parser that :func:`add_fields` built),
    then ``overrides`` (None values skipped)."""
    cli = cli_values(args, types) if isinstance(args, argparse.Namespace) else parse_args(types, args)
    merged: dict[str, Any] = {}
    for data, source in ((base or {}, "the base settings"), (read_yaml(config) if config else {}, str(config)),
                         (cli, "the command line"),
                         ({k: v for k, v in (overrides or {}).items() if v is not None}, "the keyword overrides")):
        merged.update(_layer(data, types, source))
    return [{k: v for k, v in merged.items() if k in field_names([cls])} for cls in types]


def parse(types: type | Sequence[type], config: str | Path | None = None,
          args: Sequence[str] | argparse.Namespace = (), *, base: Mapping[str, Any] | None = None,
          overrides: Mapping[str, Any] | None = None) -> Any:
    """Instances of ``types`` from :func:`collect`'s values: one instance for one class, else a tuple."""
    single = isinstance(types, type)
    seq = [types] if single else list(types)
    out = tuple(build(cls, vals, str(config or "the settings")) for cls, vals in
                zip(seq, collect(seq, config, args, base=base, overrides=overrides)))
    return out[0] if single else out


# ---- command lines -----------------------------------------------------------------------------------
class ArgumentParser(argparse.ArgumentParser):
    """argparse with exact option names only (no prefix abbreviations), an unknown option named with
    the closest known one, usage errors on one line (exit 2), and ConfigError instead of an exit when
    ``raise_errors``."""

    def __init__(self, *args: Any, raise_errors: bool = False, renamed: Mapping[str, str] | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.raise_errors = raise_errors
        self.renamed = dict(renamed or {})  # old flag -> what to use now

    def error(self, message: str):  # type: ignore[override]
        if self.raise_errors:
            raise ConfigError(message)
        # one line, like every other calver error (argparse's default prints the usage block first)
        line = " ".join(message.split())
        hint = "" if "--help" in line else f"; see {self.prog} --help"
        self.exit(2, f"{self.prog}: error: {line}{hint}\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self.unknown_message(extras))
        return ns, []

    def unknown_message(self, extras: Sequence[str]) -> str:
        flags = [a.split("=", 1)[0] for a in extras if a.startswith("--")]
        if not flags:
            return f"unrecognized arguments: {' '.join(extras)}"
        known = [s for a in self._actions if a.help is not argparse.SUPPRESS for s in a.option_strings
                 if s.startswith("--")]
        hints = []
        for f in flags:
            if f in self.renamed:
                hints.append(f"{f} (renamed: use {self.renamed[f]})")
                continue
            close = closest("--" + f[2:].replace("-", "_"), known)
            hints.append(f + (f" (did you mean {close}?)" if close else ""))
        return f"unknown option(s) {', '.join(hints)}; see --help"


def add_fields(parser: argparse.ArgumentParser, *types: type) -> None:
    """One ``--field`` option per config field of ``types`` (help from the field's metadata); values stay
    strings until :func:`cli_values` converts them, so a bad value is a ConfigError naming the field."""
    for cls in types:
        hints = _hints(cls)
        for f in key_fields(cls):
            inner, _ = _unoptional(hints[f.name])
            kw: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS}
            if _is_seq(inner):
                kw.update(nargs="+", action="extend")
            elif inner is bool:
                kw.update(nargs="?", const="true", metavar="true|false")
            names = [f.name, *f.metadata.get("aliases", ())]
            parser.add_argument(*(f"--{n}" for n in names), help=_help(f), **kw)
            kebab = [f"--{n.replace('_', '-')}" for n in names if "_" in n]
            if kebab:
                parser.add_argument(*kebab, help=argparse.SUPPRESS, **kw)
            if inner is bool and f.default is True:
                parser.add_argument(f"--no_{f.name}", dest=f.name, action="store_const", const="false",
                                    default=argparse.SUPPRESS, help=f"set {f.name} to false")
                parser.add_argument(f"--no-{f.name.replace('_', '-')}", dest=f.name, action="store_const",
                                    const="false", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _help(f: dataclasses.Field) -> str:
    text = f.metadata.get("help", "")
    if f.default is MISSING and f.default_factory is MISSING:
        text += " (required)"
    elif f.default is not MISSING and f.default != ():
        text += f" (default: {_show(f.default)})"
    return text.replace("%", "%%")  # argparse formats help with %


def _show(value: Any) -> str:
    """A default as it would be typed on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


def cli_values(args: argparse.Namespace, types: Sequence[type]) -> dict[str, Any]:
    """The config fields present in ``args`` (given on the command line), converted to their types."""
    out = {}
    for cls in types:
        hints = _hints(cls)
        for f in key_fields(cls):
            if hasattr(args, f.name):
                out[f.name] = from_text(f.name, getattr(args, f.name), hints[f.name])
    return out


def parse_args(types: Sequence[type], args: Sequence[str], prog: str = "calver") -> dict[str, Any]:
    """``--field value`` strings to converted values (API use: errors raise ConfigError)."""
    if not args:
        return {}
    parser = ArgumentParser(prog=prog, add_help=False, raise_errors=True)
    add_fields(parser, *types)
    return cli_values(parser.parse_args(list(args)), types)


def parse_command(command: str, types: type | Sequence[type], args: argparse.Namespace):
    """A subcommand's config from ``--config`` + flags, or None after printing ``calver COMMAND: error: ...``
    to stderr (the caller exits 2, like every calver command's config errors)."""
    import sys

    try:
        return parse(types, args.config, args)
    except ConfigError as e:
        print(f"calver {command}: error: {e}", file=sys.stderr)
        return None


def add_command(subparsers, name: str, types: Sequence[type], *, help: str, description: str | None = None,
                config_help: str | None = None, renamed: Mapping[str, str] | None = None,
                **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand with ``--config FILE`` and one ``--field`` per config field of ``types``."""
    p = subparsers.add_parser(name, help=help, description=description, **kwargs)
    if isinstance(p, ArgumentParser):
        p.renamed.update(renamed or {})
    p.add_argument("--config", help=config_help or "YAML file of field: value (flags below override it)")
    add_fields(p, *types)
    return p


__all__ = ["ArgumentParser", "ConfigError", "add_command", "add_fields", "build", "cfg_field", "check_config_keys",
           "check_keys", "check_types", "cli_values", "closest", "collect", "field_names", "from_text", "matches",
           "parse", "parse_args", "parse_command", "read_yaml", "unknown_key_hints"]
