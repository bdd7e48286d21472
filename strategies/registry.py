"""Find strategies by name.

Built-ins are found by scanning the modules of the ``strategies`` package (and its sub-packages)
for :class:`~ctxsim.strategies.base.Strategy` subclasses that define a ``name`` in that module: adding a
strategy is one new file, nothing else edited, and nothing registers itself as a side effect of an
import. Third-party strategies come from the ``ctxsim.strategies`` entry-point group.

An unknown name or an invalid parameter fails loudly, listing what is valid: a simulator that
silently ran the wrong strategy would corrupt every number after it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any

import ctxsim.strategies
from ctxsim.strategies.base import Strategy, StrategyConfig, StrategyEnv, StrategyError
from pydantic import ValidationError

ENTRY_POINT_GROUP = "ctxsim.strategies"
_SKIP = {"base", "registry", "templates"}


def _classes_in(module) -> list[type[Strategy]]:
    return [c for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, Strategy) and c.__module__ == module.__name__ and c.name]


@cache
def builtins() -> dict[str, type[Strategy]]:
    found: dict[str, type[Strategy]] = {}
    for info in pkgutil.walk_packages(ctxsim.strategies.__path__, prefix="ctxsim.strategies."):
        if info.name.rsplit(".", 1)[-1] in _SKIP or info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        for cls in _classes_in(module):
            if cls.name in found and found[cls.name] is not cls:
                raise StrategyError(f"two strategies named {cls.name!r}: {found[cls.name].__module__} and {cls.__module__}")
            found[cls.name] = cls
    return dict(sorted(found.items()))


@cache
def _plugins() -> dict[str, type[Strategy]]:
    out: dict[str, type[Strategy]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        cls = ep.load()
        if not (inspect.isclass(cls) and issubclass(cls, Strategy)):
            raise StrategyError(f"entry point {ep.name!r} ({ep.value}) is not a Strategy subclass")
        out[ep.name] = cls
    return out


def all_strategies() -> dict[str, type[Strategy]]:
    return {**builtins(), **_plugins()}


def names() -> list[str]:
    return list(all_strategies())


def get(name: str) -> type[Strategy]:
    found = all_strategies()
    if name not in found:
        raise StrategyError(f"unknown strategy {name!r}; valid: {', '.join(found)}")
    return found[name]


def load_class(spec: str) -> type[Strategy]:
    """``module:Class`` (or a registered name) to a strategy class."""
    if ":" not in spec:
        return get(spec)
    mod, _, attr = spec.partition(":")
    if not _DOTTED.fullmatch(mod) or not attr.isidentifier():   # ":X", ".foo:X" (relative), "m:"
        raise StrategyError(f"{spec!r}: give MODULE:CLASS with an absolute module path (a.b.c) and a class name, "
                            f"or a strategy name ({', '.join(names())})")
    try:
        cls = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise StrategyError(f"cannot load {spec!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the user's module raised while it was imported
        raise StrategyError(f"cannot load {spec!r}: importing {mod} raised {type(e).__name__}: {e}") from None
    if not (inspect.isclass(cls) and issubclass(cls, Strategy)):
        raise StrategyError(f"{spec!r} is not a Strategy subclass")
    if inspect.isabstract(cls) or cls.__module__ in _TEMPLATE_MODULES:
        raise StrategyError(f"{spec!r} is a base class for strategies, not one: give a subclass that implements it")
    return cls


_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_TEMPLATE_MODULES = frozenset({"ctxsim.strategies.base", "ctxsim.strategies.templates"})   # the protocol and template bases


def make_config(cls: type[Strategy], params: Mapping[str, Any] | None = None) -> StrategyConfig:
    """Validate parameters (strings from ``--set`` are coerced) into the strategy's config."""
    params = dict(params or {})
    valid = list(cls.Config.model_fields)
    unknown = [k for k in params if k not in valid]
    if unknown:
        raise StrategyError(f"{cls.name}: unknown parameter(s) {', '.join(unknown)}; valid: {', '.join(valid) or '(none)'}")
    try:
        cfg = cls.Config.model_validate(params)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(map(str, err['loc'])) + ': ' if err['loc'] else ''}"
                         f"{err['msg'].removeprefix('Value error, ')}" for err in e.errors())
        raise StrategyError(f"{cls.name}: invalid parameter: {msgs}") from None
    _check_values(cls.name, cfg)
    return cfg


def _check_values(name: str, cfg: StrategyConfig) -> None:
    """What holds for every strategy's parameters: no NaN or infinite number (a threshold or a
    cooldown that compares false with everything), and a ``*_min_*`` never above its ``*_max_*``."""
    import math

    values = dict(cfg)
    for k, v in values.items():
        if isinstance(v, float) and not math.isfinite(v):
            raise StrategyError(f"{name}: invalid parameter: {k}: {v} is not a finite number")
    for k, v in values.items():
        hi = k.replace("_min_", "_max_") if "_min_" in k else None
        top = values.get(hi) if hi else None
        if isinstance(v, (int, float)) and isinstance(top, (int, float)) and not isinstance(v, bool) and v > top:
            raise StrategyError(f"{name}: invalid parameter: {k} {v} is more than {hi} {top}")


def build(name_or_cls: str | type[Strategy], params: Mapping[str, Any] | None, env: StrategyEnv) -> Strategy:
    cls = get(name_or_cls) if isinstance(name_or_cls, str) else name_or_cls
    return cls(make_config(cls, params), env)


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """``["a=1", "b=x"]`` → ``{"a": "1", "b": "x"}`` (values coerced later by the config model)."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise StrategyError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def config_dict(config: StrategyConfig) -> dict[str, Any]:
    return config.model_dump(mode="json")


__all__ = ["StrategyError", "all_strategies", "build", "builtins", "get", "load_class", "make_config",
           "names", "parse_sets", "config_dict", "StrategyConfig"]
