"""Options shared by run, compare and sweep: the provider side of a run and the LLM backend."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the engine (pandas, numpy) loads when a run is configured, not at `--help`
    from ctxsim.harness.replay.engine import RunConfig


def add_provider_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("provider (the API side of the run; an imported trace carries the setting it ran with)")
    g.add_argument("--model", default=None,
                   help="price and cache every call on this model (default: each call on the model the log recorded "
                   "for it; claude-sonnet-4-6 for traces that name none)")
    g.add_argument("--window", type=int, default=None,
                   help="context window in tokens (default: the window the agent ran with, else the model's)")
    g.add_argument("--cache-ttl", choices=["5m", "1h"], default=None,
                   help="TTL of cache writes whose strategy sets none (default: the TTL the log wrote, else 5m)")
    g.add_argument("--no-cache", action="store_true", help="price as on a provider without prompt caching")
    g.add_argument("--seed", type=int, default=0, help="seed of the run (side-call failures, simulated LLM)")
    g.add_argument("--models", dest="models_file", default=None, help="extra TOML price table (same shape as models.toml)")
    g.add_argument("--token-scale", type=float, default=None,
                   help="true tokens per cl100k token (default: the scale fitted on the log, else the model's)")
    g.add_argument("--fail", action="append", default=[], metavar="KIND=P",
                   help="inject side-call failures: probability P for calls of KIND (e.g. summary=0.5)")
    g.add_argument("--llm", choices=["simulated", "live", "replay"], default="simulated",
                   help="who answers side calls: the simulated model (default), the live API, or a recorded store")
    g.add_argument("--llm-store", default=None, help="response store (JSONL) for --llm live (records) or replay")
    g.add_argument("--llm-timeout", type=float, default=None, metavar="SECONDS",
                   help="--llm live: seconds one side call may take (default 25; CTXSIM_LIVE_TIMEOUT)")
    g.add_argument("--llm-retries", type=int, default=None, metavar="N",
                   help="--llm live: retries of a failed side call (429, 5xx, connection; default 1)")
    g.add_argument("--llm-max-failures", type=int, default=None, metavar="N",
                   help="--llm live: stop the run (exit 1) after N side calls failed in a row (default 1: any "
                   "failed call; N > 1 counts the failures before as failed compactions, as simulated ones)")
    m = p.add_argument_group("modelling assumptions (each listed with its source in reports)")
    m.add_argument("--retention", action="append", default=[], metavar="KEY=VALUE",
                   help="a constant of the retention model (harness/retention/scoring.py RetentionParams), value as TOML, "
                   "e.g. summary_fidelity=0.8 or 'category_weights={goal=3}'")
    m.add_argument("--summariser", action="append", default=[], metavar="KEY=VALUE",
                   help="a constant of the simulated summariser (harness/llm/simulated.py SimParams), e.g. fact_share=0.3")
    m.add_argument("--recovery", action="append", default=[], metavar="KEY=VALUE",
                   help="a knob of the closed-loop recovery (harness/retention/recovery.py RecoveryParams), value as TOML, "
                   "e.g. enabled=false, scope='all' or 'probability={read=1.0,rerun=0.5}'")


def run_config(args, **overrides) -> RunConfig:
    from ctxsim.harness.cli import BadInput, checks

    checks.seed(args.seed)
    checks.token_scale(args.token_scale)
    checks.window(args.window)
    kinds = checks.side_call_kinds()
    rates = {}
    for item in args.fail:
        kind, sep, p = item.partition("=")
        kind = kind.strip()
        try:
            rates[kind] = float(p)
        except ValueError:
            raise BadInput(f"--fail expects KIND=PROBABILITY, got {item!r}") from None
        if not sep or not math.isfinite(rates[kind]) or not 0 <= rates[kind] <= 1:
            raise BadInput(f"--fail expects KIND=PROBABILITY in [0, 1], got {item!r}")
        if kind not in kinds:
            raise BadInput(f"--fail {item}: unknown side-call kind {kind!r} (valid: {', '.join(kinds)})")
    backend = None
    if args.model is not None and not args.model.strip():
        raise BadInput("--model: give a model name (`ctxsim strategies` runs on claude-sonnet-4-6 by default)")
    if args.llm == "simulated" and args.llm_store:
        raise BadInput("--llm-store is for --llm live (records) or --llm replay, not the simulated model")
    if args.llm != "simulated":
        from ctxsim.harness.llm.live import LiveError, make_backend
        from ctxsim.harness.llm.response_store import StoreError

        sd = overrides.get("session_dir")
        live_kw = {}
        if args.llm == "live":
            t, r, n = getattr(args, "llm_timeout", None), getattr(args, "llm_retries", None), \
                getattr(args, "llm_max_failures", None)
            if t is not None and not (math.isfinite(t) and 0 < t <= 3600):
                raise BadInput(f"--llm-timeout must be a number of seconds in (0, 3600], got {t}")
            if r is not None and not 0 <= r <= 10:
                raise BadInput(f"--llm-retries must be in 0..10, got {r}")
            if n is not None and n < 1:
                raise BadInput(f"--llm-max-failures must be at least 1, got {n}")
            live_kw = {"timeout": t, "max_retries": r, "max_failures": n}
        elif any(getattr(args, k, None) is not None for k in ("llm_timeout", "llm_retries", "llm_max_failures")):
            raise BadInput("--llm-timeout, --llm-retries and --llm-max-failures apply to --llm live only")
        try:
            backend = make_backend(args.llm, Path(args.llm_store) if args.llm_store else None,
                                   volatile_paths=[str(sd)] if sd else (), **live_kw)
        except (ValueError, LiveError, StoreError) as e:
            raise BadInput(str(e)) from None
    from ctxsim.harness.cli import checks

    table = checks.price_table(args.models_file)
    try:
        if args.model is not None:
            table.get(args.model)
    except (KeyError, ValueError) as e:
        raise BadInput(str(e).strip('"')) from None
    if args.window is not None and args.window <= 0:
        raise BadInput("--window must be a positive number of tokens")
    retention, summariser = assumption_sets(getattr(args, "retention", []), getattr(args, "summariser", []))
    from ctxsim.harness.replay.engine import RunConfig

    overrides.setdefault("recovery", recovery_set(getattr(args, "recovery", None) or []))
    return RunConfig(model=args.model, window=args.window, cache_ttl=args.cache_ttl, cache=not args.no_cache,
                     seed=args.seed, failure_rates=rates, backend=backend, token_scale=args.token_scale,
                     models_file=Path(args.models_file) if args.models_file else None, retention=retention,
                     summariser=summariser, **overrides)


def key_values(flag: str, items: list[str]) -> dict:
    """KEY=VALUE items of ``flag``, each value read as TOML (a bare word stays a string)."""
    import tomllib

    from ctxsim.harness.cli import BadInput

    d = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"{flag} expects KEY=VALUE, got {item!r}")
        try:
            d[key.strip()] = tomllib.loads(f"v = {value.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            d[key.strip()] = value.strip()
    return d


def recovery_set(items: list[str]) -> dict:
    """``--recovery`` KEY=VALUE items (values read as TOML), checked against RecoveryParams."""

    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.retention.recovery import RecoveryParams

    d = key_values("--recovery", items)
    try:
        RecoveryParams(**d)
    except ValueError as e:
        raise BadInput(f"--recovery: {_first(e)}") from None
    return d


def assumption_sets(retention: list[str], summariser: list[str]) -> tuple[dict, dict]:
    """``--retention`` / ``--summariser`` KEY=VALUE items (values read as TOML), checked against
    RetentionParams and SimParams before any run."""

    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.llm.simulated import SimParams
    from ctxsim.harness.retention.scoring import RetentionParams

    out = [key_values(flag, items) for flag, items in (("--retention", retention), ("--summariser", summariser))]
    try:
        RetentionParams(**out[0])
    except ValueError as e:
        raise BadInput(f"--retention: {_first(e)}") from None
    import dataclasses

    valid = [f.name for f in dataclasses.fields(SimParams)]
    unknown = sorted(set(out[1]) - set(valid))
    if unknown:
        raise BadInput(f"--summariser: unknown constant {unknown[0]!r} (valid: {', '.join(valid)})")
    try:
        SimParams(**out[1])
    except (TypeError, ValueError) as e:
        raise BadInput(f"--summariser: {e}") from None
    return out[0], out[1]


def _first(e: Exception) -> str:
    errs = getattr(e, "errors", lambda: [])()
    if errs:
        err = errs[0]
        return f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
    return str(e)


def warn_overrides(command: str, cfg: RunConfig, traces) -> None:
    """Print :func:`ctxsim.harness.replay.setting.override_warnings` for each trace to stderr (each line once)."""
    import sys

    from ctxsim.harness.replay.setting import override_warnings

    seen: set[str] = set()
    for t in traces:
        for line in override_warnings(cfg, t):
            if line not in seen:
                seen.add(line)
                print(f"ctxsim {command}: warning: {line}", file=sys.stderr)
