"""A run's options against the setting an imported trace recorded (``header.recorded``).

A replay of an imported trace takes the recorded setting by default (``ctxsim.harness.replay.engine.RunConfig``);
an option that sets a field for every call overrides it, and the command line says so in one line
naming what the log recorded, so a number is never read as the recorded session's by mistake.
"""

from __future__ import annotations

from typing import Any


def override_warnings(cfg: Any, trace: Any) -> list[str]:
    """One line per recorded setting the options override, naming what the log recorded."""
    rec = trace.header.recorded
    if rec is None:
        return []
    name = trace.path or trace.header.name
    out = []
    if cfg.model is not None and rec.models and set(rec.models) != {cfg.model}:
        ran = ", ".join(f"{m} ({sum(r.values())} calls)" for m, r in rec.models.items())
        out.append(f"--model {cfg.model} prices every call of {name} on it; the log recorded {ran}")
    if cfg.window is not None and rec.window and cfg.window != rec.window:
        out.append(f"--window {cfg.window:,} on {name}; the agent ran with {rec.window:,} ({rec.window_evidence})")
    if cfg.cache_ttl is not None and rec.cache_ttl and cfg.cache_ttl != rec.cache_ttl:
        out.append(f"--cache-ttl {cfg.cache_ttl} on {name}; the log wrote {rec.cache_ttl} ({rec.cache_ttl_evidence})")
    if cfg.token_scale is not None and rec.token_scale and abs(cfg.token_scale - rec.token_scale) > 1e-9:
        out.append(f"--token-scale {cfg.token_scale} on {name}; the scale fitted on the log is {rec.token_scale} "
                   f"({rec.token_scale_evidence})")
    if cfg.token_scale is None and rec.token_scale:
        from ctxsim.harness.provider.tokenizer import default_name

        now = default_name()
        if rec.tokenizer != now:   # the scale maps the other tokenizer's counts onto the model's: off by their ratio
            out.append(f"{name}: its token scale {rec.token_scale} was fitted with the {rec.tokenizer} tokenizer and "
                       f"this run counts with {now}: run with --tokenizer {rec.tokenizer}, or import the log again "
                       f"under --tokenizer {now}")
        rendered = _tool_format(cfg.model or trace.header.model, getattr(cfg, "models_file", None))
        if rendered is not None and rec.tool_calls != rendered:   # the fit counted its tool calls another way
            out.append(f"{name}: its token scale {rec.token_scale} was fitted with its tool calls counted as "
                       f"{rec.tool_calls} and this run counts them as {rendered} (the model's provider reads them so): "
                       f"import the log again to fit it anew (ctxsim fidelity fits it anew by itself)")
    return out


def _tool_format(model: str | None, models_file: Any = None) -> str | None:
    """How the run counts ``model``'s tool calls; None for a model or a table the run cannot price."""
    from ctxsim.harness.provider.models import ModelsFileError, provider_of
    from ctxsim.harness.provider.tokenizer import tool_format

    try:
        provider = provider_of(model, models_file)
    except ModelsFileError:   # the run fails on it with its own message
        return None
    return tool_format(provider) if provider else None
