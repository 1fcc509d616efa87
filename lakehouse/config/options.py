"""Typed ``hoodie.*`` options: the parsers, the dataclass field carrying a key, and building a
config object from a plain mapping (the only place ``dict[str, str]`` meets the typed configs)."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import field
from typing import Any, Callable, Mapping

from lakehouse.errors import ConfigError


def parse_bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ConfigError(f"{key}={v!r} is not a boolean", help=f"set {key} to true or false")


def parse_int(minimum: int = 0) -> Callable[[str, Any], int]:
    def parse(key: str, v: Any) -> int:
        try:
            # int() would quietly turn 1.5 into 1 and True into 1.
            if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
                raise ValueError(v)
            n = int(v)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{key}={v!r} is not an integer",
                              help=f"set {key} to a whole number") from None
        if n < minimum:
            raise ConfigError(f"{key}={n} is below its minimum {minimum}",
                              help=f"set {key} to at least {minimum}")
        return n
    return parse


def parse_float_between(lo: float, hi: float) -> Callable[[str, Any], float]:
    def parse(key: str, v: Any) -> float:
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}={v!r} is not a number", help=f"set {key} to a number") from None
        if not lo < x < hi:
            raise ConfigError(f"{key}={x} is outside ({lo}, {hi})",
                              help=f"set {key} between {lo} and {hi}")
        return x
    return parse


def parse_enum(e: type[enum.StrEnum]) -> Callable[[str, Any], Any]:
    def parse(key: str, v: Any) -> Any:
        s = str(v).strip()
        for member in e:
            if s.upper() == member.value.upper():
                return member
        raise ConfigError(f"{key}={v!r} is not one of {', '.join(m.value for m in e)}",
                          help=f"set {key} to one of the listed values")
    return parse


def parse_megabytes(minimum: float) -> Callable[[str, Any], float]:
    """Flink's sizes: MB, as a double."""
    def parse(key: str, v: Any) -> float:
        try:
            if isinstance(v, bool):
                raise ValueError(v)
            mb = float(v)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}={v!r} is not a number of MB",
                              help=f"set {key} to a size in MB, e.g. 256") from None
        if not mb >= minimum or mb == float("inf"):
            raise ConfigError(f"{key}={v} is below its minimum {minimum:g} MB",
                              help=f"set {key} to at least {minimum:g} (MB)")
        return mb
    return parse


def parse_str(key: str, v: Any) -> str:
    return str(v)


def parse_fields(key: str, v: Any) -> tuple[str, ...]:
    if isinstance(v, (list, tuple)):
        items = [str(x).strip() for x in v]
    else:
        items = [x.strip() for x in str(v).split(",")] if v is not None else []
    items = [x for x in items if x]
    if len(set(items)) != len(items):
        raise ConfigError(f"{key}={v!r} names a field twice", help="list each field once")
    return tuple(items)


def opt(key: str, default: Any, parse: Callable[[str, Any], Any], doc: str = "") -> Any:
    return field(default=default, metadata={"key": key, "parse": parse, "doc": doc})


def option_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.metadata["key"]: f for f in dataclasses.fields(cls) if "key" in f.metadata}


def option_keys(cls: type) -> frozenset[str]:
    """The ``hoodie.*`` keys a config class reads."""
    return frozenset(option_fields(cls))


def build_config(cls: type, options: Mapping[str, Any], *, strict: bool, **fixed: Any) -> Any:
    by_key = option_fields(cls)
    kwargs: dict[str, Any] = dict(fixed)
    for k, v in options.items():
        f = by_key.get(k)
        if f is None:
            if strict and k.startswith("hoodie.") and k not in PASSTHROUGH_KEYS:
                raise ConfigError(f"unknown option {k!r}",
                                  help="check the spelling; `lakehouse options` lists every option")
            continue
        kwargs[f.name] = f.metadata["parse"](k, v) if v is not None else f.default
    return cls(**kwargs)


def options_to_properties(obj: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, f in option_fields(type(obj)).items():
        v = getattr(obj, f.name)
        if v is None:
            continue
        if isinstance(v, bool):
            out[key] = "true" if v else "false"
        elif isinstance(v, tuple):
            out[key] = ",".join(v)
        else:
            out[key] = str(v)
    return out


# Options Hudi writes or accepts that lakehouse keeps but does not interpret.
PASSTHROUGH_KEYS = frozenset({
    "hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight",
    "hoodie.compaction.record.merger.strategy", "hoodie.table.keygenerator.type",
    "hoodie.table.cdc.enabled", "hoodie.table.initial.version", "hoodie.record.merge.mode",
    "hoodie.datasource.write.table.type", "hoodie.table.base.file.format",
})


# Hudi's Flink writer names a few settings without the hoodie. prefix; where lakehouse implements
# the same rule (write buffers flushed by size) it reads the same key.
FLINK_KEYS = frozenset({"write.task.max.size", "write.batch.size"})


# --- hoodie.properties ----------------------------------------------------------------------


def check_option_names(options: Mapping[str, Any] | None, where: str) -> None:
    """Options of a write or a service are Hudi's ``hoodie.*`` keys: any other key (a misspelt
    prefix, a Spark or storage setting in the wrong place) would be silently ignored."""
    foreign = sorted(str(k) for k in (options or {})
                     if not str(k).startswith("hoodie.") and str(k) not in FLINK_KEYS)
    if foreign:
        raise ConfigError(f"option(s) {', '.join(repr(k) for k in foreign)} passed to {where} are "
                          "not hoodie.* options (nor Flink's write.task.max.size / write.batch.size)",
                          help="check the spelling of the prefix; storage settings (s3.*) go to "
                               "open_table, and `lakehouse options` lists every hoodie.* option")


# Every key of every config class: filled by lakehouse.config once all of them are defined
# (they are defined with the helpers of this module, so they cannot be listed here).
KNOWN_OPTION_KEYS: set[str] = set()


def service_config(cls: type, options: Mapping[str, Any] | None) -> Any:
    """``cls`` from its options in ``options``; any unknown ``hoodie.*`` key is an error."""
    options = dict(options or {})
    unknown = [k for k in options if k.startswith("hoodie.") and k not in KNOWN_OPTION_KEYS]
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join(sorted(unknown))}",
                          help="check the spelling; `lakehouse options` lists every option")
    own = option_fields(cls)
    return build_config(cls, {k: v for k, v in options.items() if k in own}, strict=True)
