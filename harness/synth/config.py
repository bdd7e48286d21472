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

from ctxsim.harness.files import bundled, regular
from ctxsim.harness.model.trace import FACT_CATEGORIES
from ctxsim.harness.synth import distributions as D
from ctxsim.harness.synth.distributions import LogNormal
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

TOOL_KINDS = ("bash", "edit", "read", "grep", "glob", "web", "task")
RATE_CATEGORIES = ("file", "constraint", "preference", "feedback")
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

    facts: dict[str, float] = Field(default_factory=lambda: {"constraint": 1.0, "file": 4.0, "preference": 0.6,
                                                             "feedback": 0.6},
                                    description="facts per 100 calls: file lines noted among what the agent reads, "
                                                "and constraints, preferences and feedback the user states (the goal: "
                                                "one per session; an error and a root-cause decision: one per bug)")
    file_facts_in_huge: float = Field(0.8, ge=0, le=1,
                                      description="chance a file fact goes into a huge result of its call when there is one")
    huge_file_fact_share: float = Field(0.0, ge=0, le=1,
                                        description="chance a huge read result holds an extra file fact (large files hold details)")
    area_files: int = Field(3, ge=1, le=20, description="source files most of a session's bugs are in (real sessions "
                                                        "stay in one part of a project; modelling choice)")
    area_drift: float = Field(0.15, ge=0, le=1, description="chance a new bug moves one area file to another file")
    area_focus: float = Field(0.8, ge=0, le=1, description="share of bugs drawn from the session's area files")
    attempt_weights: tuple[float, float, float] = Field((0.3, 0.4, 0.3),
                                                        description="chance of 0, 1, 2 wrong attempts before a bug's fix")
    new_task_share: float = Field(0.7, ge=0, le=1,
                                  description="chance the user reports the next bug once the current one is fixed")
    grep_files_share: float = Field(0.04, ge=0, le=1,
                                    description="share of Grep calls in files_with_matches mode (the rest: content)")
    probe_every: float = Field(8.0, ge=1, description="mean calls between probes")
    probe_goal_share: float = Field(0.03, ge=0, le=1, description="share of probes that need the session goal")
    probe_max_needs: int = Field(3, ge=1, le=10, description="most facts one probe needs")
    probe_mix: dict[str, float] = Field(default_factory=lambda: {"file": 0.6, "error": 0.15, "decision": 0.1,
                                                                 "constraint": 0.05, "preference": 0.05,
                                                                 "feedback": 0.05},
                                        description="weight of each category among a probe's needs (goal: probe_goal_share)")
    probe_age: LogNormal = Field(LogNormal(median=28_840, p90=89_698, lo=200),
                                 description="tokens since a needed fact first entered (fitted: "
                                             "harness/synth/recurrence.py on the real logs)")
    probe_age_unseen: LogNormal = Field(LogNormal(median=1_725, p90=15_488, lo=50, hi=40_000),
                                        description="tokens back of a needed fact the agent cannot look at again (what "
                                                    "the user said, what it decided, a fixed bug's error): real uses are "
                                                    "of things last seen this far back (fitted, recurrence.py); "
                                                    "none is needed from further back than hi (1.7% of real uses "
                                                    "were last seen over 40k tokens back)")
    long_range: bool = Field(True, description=(
        "a share of needs reach back beyond what the agent looks at again: at each need the re-need distance "
        "(tokens since its fact was last seen) passes long_range_tokens with the probability the real logs show at "
        "that position, and the need is of a fact last seen that far back, drawn from the fitted tail "
        "(harness/data/reneed.json, fitted on the development population: harness/calibration/reneed_fit.py). "
        "No window is known: at any window the needs whose distance passes a turnover point are at risk"))
    long_range_tokens: int = Field(40_000, ge=1_000, le=10_000_000, description=(
        "re-need distance from which a need is drawn from the fitted tail instead of the near mechanism "
        "(probe_age_unseen's hi: what that mechanism places reaches at most this far back)"))
    reseen_share: float = Field(0.98, ge=0, le=1,
                                description="chance the agent looks again (re-reads, re-runs) at a file line or failing "
                                            "run right before it needs it (real agents re-read what they use)")
    reseen_calls: LogNormal = Field(LogNormal(median=1.5, p90=8, lo=1, hi=40),
                                    description="calls before a use at which the agent looks again at what it will use "
                                                "(fitted so the last-seen tokens match the real logs' median 1.7k, p90 "
                                                "15.5k: real uses last saw the item a median 3, p90 16 calls back, in "
                                                "calls that added fewer tokens than the synthetic ones)")
    fix_use_share: float = Field(0.12, ge=0, le=1,
                                 description="chance an edit of a bug needs the bug's root-cause decision and its "
                                             "latest failure (stated or seen a few calls earlier)")
    preference_use_share: float = Field(0.03, ge=0, le=1,
                                        description="chance a preference/feedback is needed at a call doing what it governs")
    cross_session_share: float = Field(0.35, ge=0, le=1,
                                       description="in sessions after the first, share of needs reaching earlier sessions")
    cross_session_categories: tuple[str, ...] = Field(("constraint", "decision", "preference", "feedback"),
                                                      description="categories worth remembering across sessions")
    seed_files: bool = Field(True, description="header.meta.files: the user's and the project's instruction files")
    seed_memories: bool = Field(False, description="header.meta.files also holds memories of an earlier use of the agent")
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
        bad = sorted(set(v) - set(RATE_CATEGORIES))
        if bad:
            raise ValueError(f"facts: unknown or non-rate categories {bad}; rates are for {', '.join(RATE_CATEGORIES)} "
                             "(goal: one per session; error and decision: one per bug)")
        if any(x < 0 for x in v.values()):
            raise ValueError("facts: rates must be >= 0")
        return v

    @field_validator("probe_mix")
    @classmethod
    def _mix(cls, v: dict[str, float]) -> dict[str, float]:
        bad = sorted(set(v) - (set(FACT_CATEGORIES) - {"goal"}))
        if bad or any(x < 0 for x in v.values()) or sum(v.values()) <= 0:
            raise ValueError(f"probe_mix: weights >= 0 with a positive sum, for categories other than goal; got {v}")
        return v

    @field_validator("attempt_weights")
    @classmethod
    def _attempts(cls, v: tuple[float, float, float]) -> tuple[float, float, float]:
        if any(x < 0 for x in v) or sum(v) <= 0:
            raise ValueError("attempt_weights: three weights >= 0 with a positive sum")
        return v

    @property
    def attempt_weights_p(self) -> list[float]:
        w = list(self.attempt_weights)
        return [x / sum(w) for x in w] if sum(w) > 0 else [1.0, 0.0, 0.0]


# --- loading --------------------------------------------------------------------------------------
def preset_names() -> list[str]:
    return sorted(p.stem for p in bundled.presets_dir().glob("*.toml"))


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
    """A preset by name (``traces/presets/NAME.toml``, in a wheel ``harness/data/traces/presets``) or path,
    with ``key=value`` overrides."""
    p = Path(preset)
    if not (p.suffix == ".toml" or p.exists()):
        p = bundled.presets_dir() / f"{preset}.toml"
        if not p.exists():
            raise PresetError(f"unknown preset {preset!r}; known: {', '.join(preset_names())} (or a path to a .toml file)")
    try:
        data = tomllib.loads(regular.read_text(p))   # a file (not /dev/zero, not a fifo), read to a bound
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
