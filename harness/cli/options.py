"""Options shared by run, compare and sweep: the provider side of a run and the LLM backend."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.engine import RunConfig


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


def run_config(args, **overrides) -> RunConfig:
    from harness.cli import BadInput

    rates = {}
    for item in args.fail:
        kind, sep, p = item.partition("=")
        try:
            rates[kind] = float(p)
        except ValueError:
            raise BadInput(f"--fail expects KIND=PROBABILITY, got {item!r}") from None
        if not sep or not 0 <= rates[kind] <= 1:
            raise BadInput(f"--fail expects KIND=PROBABILITY in [0, 1], got {item!r}")
    backend = None
    if args.llm != "simulated":
        from harness.live import LiveError, make_backend
        from harness.response_store import StoreError

        sd = overrides.get("session_dir")
        try:
            backend = make_backend(args.llm, Path(args.llm_store) if args.llm_store else None,
                                   volatile_paths=[str(sd)] if sd else ())
        except (ValueError, LiveError, StoreError) as e:
            raise BadInput(str(e)) from None
    from harness.provider.models import load_table

    try:
        if args.model is not None:
            load_table(args.models_file).get(args.model)
    except (KeyError, ValueError) as e:
        raise BadInput(str(e).strip('"')) from None
    if args.window is not None and args.window <= 0:
        raise BadInput("--window must be a positive number of tokens")
    return RunConfig(model=args.model, window=args.window, cache_ttl=args.cache_ttl, cache=not args.no_cache,
                     seed=args.seed, failure_rates=rates, backend=backend, token_scale=args.token_scale,
                     models_file=Path(args.models_file) if args.models_file else None, **overrides)


def warn_overrides(command: str, cfg: RunConfig, traces) -> None:
    """Print :func:`harness.setting.override_warnings` for each trace to stderr (each line once)."""
    import sys

    from harness.setting import override_warnings

    seen: set[str] = set()
    for t in traces:
        for line in override_warnings(cfg, t):
            if line not in seen:
                seen.add(line)
                print(f"ctxsim {command}: warning: {line}", file=sys.stderr)
