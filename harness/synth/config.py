"""The generator's configuration (one TOML preset = one :class:`SynthConfig`) and its loader.

Every field has a default fitted to the real logs or a documented modelling choice, so a preset only
states what makes it what it is (``long-1m``: many calls; ``spill-heavy``: huge results). ``--set
key=value`` overrides any field, nested ones by dotted path (``result_chars.read.median=3000``,
``facts.file=6``); the value is read as a TOML value (``3``, ``0.5``, ``true``, ``"text"``) and
falls back to a plain string.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.synth import distributions as D
from harness.synth.distributions import LogNormal
from harness.trace import FACT_CATEGORIES

PRESET_DIR = Path(__file__).resolve().parents[2] / "traces" / "presets"
TOOL_KINDS = ("bash", "edit", "read", "grep", "glob", "web", "task")
RESULT_MAX_CHARS = 400_000  # clip: the largest single result in the logs is 84k; spill-heavy goes beyond


class PresetError(ValueError):
    """A preset or an override that cannot be used (the message names the file or the key)."""


def _fitted_map(table: dict[str, tuple[int, float, float]], hi: float | None = None) -> dict[str, LogNormal]:
    return {k: D.fitted(v, lo=1.0, hi=hi) for k, v in table.items()}


class SynthConfig(BaseModel):
    """What a synthetic session looks like. Sizes in characters, times in seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("synthetic", description="trace name (header.name)")
    description: str = Field("", description="what this preset is for")
    seed: int = Field(0, ge=0, description="numpy Generator seed (the CLI's --seed overrides it)")
    calls: int = Field(30, ge=1, le=200_000, description="model calls in the whole trace")
    sessions: int = Field(1, ge=1, le=1_000, description="agent launches; >1 adds session_start/session_end")
    session_gap_s: LogNormal = Field(LogNormal(median=20_000, p90=80_000, lo=3_600),
                                     description="time between two sessions (modelling choice: hours)")
    system_chars: int = Field(9_000, ge=0, description="system prompt size (Claude Code's is 10-15k tokens with tools)")

    tool_mix: dict[str, float] = Field(default_factory=lambda: dict(D.FITTED_TOOL_MIX),
                                       description="share of tool calls by kind (fitted)")
    result_chars: dict[str, LogNormal] = Field(default_factory=lambda: _fitted_map(D.FITTED_RESULT_CHARS, RESULT_MAX_CHARS),
                                               description="tool result size by kind (fitted)")
    input_chars: dict[str, LogNormal] = Field(default_factory=lambda: _fitted_map(D.FITTED_INPUT_CHARS, 60_000),
                                              description="tool_use input size by kind (fitted)")
    text_chars: LogNormal = Field(D.fitted(D.FITTED_TEXT_CHARS, lo=20, hi=20_000),
                                  description="assistant text per call (fitted)")
    parallel: dict[str, float] = Field(default_factory=lambda: {k: v for k, v in D.FITTED_PARALLEL.items() if k != "0"},
                                       description="tool calls per non-final call (fitted, the 0 bucket is the turn's final answer)")
    calls_per_turn: LogNormal = Field(D.fitted(D.FITTED_CALLS_PER_TURN, lo=1, hi=150),
                                      description="model calls per user turn (fitted)")
    call_gap_s: LogNormal = Field(D.fitted(D.FITTED_CALL_GAP_S, lo=0.5, hi=600),
                                  description="time between calls of a turn (fitted)")
    user_gap_s: LogNormal = Field(D.fitted(D.FITTED_USER_GAP_S, lo=5, hi=7_200),
                                  description="time before the next user message (fitted; ~9% exceed 300 s)")

    huge_share: float = Field(0.0, ge=0, le=1, description="share of read/bash results drawn from huge_chars")
    huge_chars: LogNormal = Field(LogNormal(median=80_000, p90=160_000, lo=50_001, hi=RESULT_MAX_CHARS),
                                  description="size of a huge result (above the 50,000-char spill threshold)")
    burst_share: float = Field(0.0, ge=0, le=1, description="share of calls that read several large files in parallel")
    burst_tools: int = Field(5, ge=2, le=16, description="tool calls in a burst")
    burst_min_total: int = Field(200_001, ge=1, description="a burst's results add up to at least this many chars")

    facts: dict[str, float] = Field(default_factory=lambda: {"constraint": 1.0, "decision": 2.0, "error": 2.0,
                                                             "file": 4.0, "preference": 0.6, "feedback": 0.6},
                                    description="facts planted per 100 calls by category (the goal: one per session)")
    file_facts_in_huge: float = Field(0.8, ge=0, le=1,
                                      description="chance a file fact goes into a huge result of its call when there is one")
    huge_file_fact_share: float = Field(0.0, ge=0, le=1,
                                        description="chance a huge read result holds an extra file fact (large files hold details)")
    probe_every: float = Field(8.0, ge=1, description="mean calls between probes")
    probe_goal_share: float = Field(0.4, ge=0, le=1, description="share of probes that need the session goal")
    probe_max_needs: int = Field(3, ge=1, le=10, description="most facts one probe needs")
    probe_recent_calls: float = Field(40.0, gt=0, description="scale of the recency weighting (calls)")
    probe_far_share: float = Field(0.2, ge=0, le=1, description="share of needs drawn uniformly over all past facts")
    cross_session_share: float = Field(0.35, ge=0, le=1,
                                       description="in sessions after the first, share of needs reaching earlier sessions")
    cross_session_categories: tuple[str, ...] = Field(("constraint", "decision", "preference", "feedback"),
                                                      description="categories worth remembering across sessions")
    subtask_share: float = Field(0.0, ge=0, le=1, description="share of user turns that are an exploratory span")
    subtask_calls: LogNormal = Field(LogNormal(median=10, p90=22, lo=3, hi=60),
                                     description="calls in an exploratory span")

    @field_validator("tool_mix", "parallel")
    @classmethod
    def _weights(cls, v: dict[str, float]) -> dict[str, float]:
        if not v or sum(v.values()) <= 0 or any(w < 0 for w in v.values()):
            raise ValueError("weights must be >= 0 with a positive sum")
        return v

    @field_validator("tool_mix", "result_chars", "input_chars")
    @classmethod
    def _kinds(cls, v: dict) -> dict:
        bad = sorted(set(v) - set(TOOL_KINDS))
        if bad:
            raise ValueError(f"unknown tool kind(s) {bad}; known: {', '.join(TOOL_KINDS)}")
        return v

    @field_validator("parallel")
    @classmethod
    def _parallel(cls, v: dict[str, float]) -> dict[str, float]:
        for k in v:
            if not k.isdigit() or int(k) < 1:
                raise ValueError(f"parallel keys are tool counts >= 1, got {k!r}")
        return v

    @field_validator("facts")
    @classmethod
    def _facts(cls, v: dict[str, float]) -> dict[str, float]:
        bad = sorted(set(v) - set(FACT_CATEGORIES) | ({"goal"} & set(v)))
        if bad:
            raise ValueError(f"facts: unknown or non-rate categories {bad}; rates are for "
                             f"{', '.join(c for c in FACT_CATEGORIES if c != 'goal')}")
        return v


# --- loading --------------------------------------------------------------------------------------
def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def _parse_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _set_path(d: dict[str, Any], key: str, value: Any, defaults: dict[str, Any]) -> None:
    parts = key.split(".")
    cur, dflt = d, defaults
    for p in parts[:-1]:
        if p not in cur:
            base = dflt.get(p) if isinstance(dflt, dict) else None
            cur[p] = dict(base) if isinstance(base, dict) else {}
        if not isinstance(cur[p], dict):
            raise PresetError(f"--set {key}: {p!r} is not a table")
        cur, dflt = cur[p], (dflt.get(p) if isinstance(dflt, dict) else {}) or {}
    cur[parts[-1]] = value


def load_preset(preset: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> SynthConfig:
    """A preset by name (``traces/presets/NAME.toml``) or path, with ``key=value`` overrides."""
    p = Path(preset)
    if not (p.suffix == ".toml" or p.exists()):
        p = PRESET_DIR / f"{preset}.toml"
        if not p.exists():
            raise PresetError(f"unknown preset {preset!r}; known: {', '.join(preset_names())} (or a path to a .toml file)")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise PresetError(f"{p}: cannot read: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise PresetError(f"{p}: not TOML: {e}") from None
    data.setdefault("name", p.stem)
    defaults = SynthConfig().model_dump()
    for ov in overrides:
        if "=" not in ov:
            raise PresetError(f"--set {ov!r}: expected key=value")
        k, v = ov.split("=", 1)
        k = k.strip()
        top = k.split(".")[0]
        if top not in SynthConfig.model_fields:
            raise PresetError(f"--set {k}: unknown field {top!r}; fields: {', '.join(SynthConfig.model_fields)}")
        _set_path(data, k, _parse_value(v.strip()), {**defaults, **{x: y for x, y in data.items() if isinstance(y, dict)}})
    try:
        return SynthConfig.model_validate(data)
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(str(x) for x in er['loc'])}: {er['msg']}" for er in e.errors()[:5])
        raise PresetError(f"{p}: {errs}") from None
