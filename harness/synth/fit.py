"""Fit the generator's distributions to the real logs in ``../shared/traces/real/``.

Run ``python -m ctxsim.harness.synth.fit [REAL_DIR]``: it reads the Claude Code transcripts, the Codex
rollout and the SWE-agent trajectories, and prints, per tool kind, how often it is called and the
size of its results (characters), how many tool calls one model call makes in parallel, how many
calls a user turn takes, and the time gaps between calls. The figures it prints are the ones
recorded in :mod:`ctxsim.harness.synth.distributions` (``FITTED``) and in ``traces/README.md``; the fit is
a log-normal through the empirical median and 90th percentile (robust to the few huge outliers a
small sample holds), not a maximum-likelihood fit.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np


def default_real_dir() -> Path:
    """``../shared/traces/real`` beside the checkout: this is a developer's command, run from the repository."""
    from ctxsim.harness.files import bundled

    real = bundled.shared_logs()
    if real is None:
        raise SystemExit("no real logs given, and not run from a ctxsim checkout with ../shared/traces/real "
                         "beside it: pass the folder of real logs")
    return real

# Claude Code tool names -> the generator's tool kinds
CLAUDE_KIND = {
    "Read": "read", "Bash": "bash", "Grep": "grep", "Glob": "glob", "LS": "glob",
    "Edit": "edit", "MultiEdit": "edit", "Write": "edit", "NotebookEdit": "edit",
    "WebFetch": "web", "WebSearch": "web", "Task": "task", "TaskOutput": "task",
    "TodoWrite": "todo",
}
Z90 = 1.2815515655446004  # standard normal 90th percentile


def kind_of_command(cmd: str) -> str:
    """Tool kind of a shell command (Codex and SWE-agent run everything through a shell)."""
    c = cmd.strip()
    if re.match(r"^(rg|grep|ag|git grep|search_dir|search_file|find_file)\b", c):
        return "grep"
    if re.match(r"^(cat|sed -n|head|tail|nl|open|goto|scroll_up|scroll_down|less)\b", c):
        return "read"
    if re.match(r"^(ls|find|tree|fd)\b", c):
        return "glob"
    if re.match(r"^(apply_patch|edit|create|insert|str_replace)\b", c):
        return "edit"
    return "bash"


@dataclass
class Sample:
    """What the fit needs, pooled over the logs."""

    result_chars: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    input_chars: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # tool_use input JSON
    text_chars: list[int] = field(default_factory=list)      # assistant text per call
    tool_calls: Counter = field(default_factory=Counter)
    parallel: list[int] = field(default_factory=list)       # tool_use blocks per model call
    calls_per_turn: list[int] = field(default_factory=list)  # model calls per user turn
    call_gaps: list[float] = field(default_factory=list)     # seconds between consecutive calls
    user_gaps: list[float] = field(default_factory=list)     # end of a turn -> next user message
    sources: list[str] = field(default_factory=list)


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(x.get("text", "") for x in content if isinstance(x, dict))
    return ""


def read_claude_code(path: Path, s: Sample) -> None:
    """One Claude Code transcript: one line per content block, calls joined by requestId."""
    calls: dict[str, dict] = {}
    order: list[str] = []
    kinds: dict[str, str] = {}
    events: list[tuple[float, str, str]] = []  # (t, "call"|"user", call key)
    for raw in path.open(encoding="utf-8"):
        o = json.loads(raw)
        if o.get("isSidechain") or o.get("type") not in ("user", "assistant"):
            continue
        t = _ts(o["timestamp"])
        msg = o["message"]
        if o["type"] == "assistant":
            key = o.get("requestId") or msg.get("id")
            if key not in calls:
                calls[key] = {"t": t, "tools": 0}
                order.append(key)
                events.append((t, "call", key))
            for b in msg.get("content", []):
                if b.get("type") == "text" and b.get("text", "").strip():
                    s.text_chars.append(len(b["text"]))
                if b.get("type") == "tool_use":
                    calls[key]["tools"] += 1
                    k = CLAUDE_KIND.get(b["name"], "other")
                    kinds[b["id"]] = k
                    s.tool_calls[k] += 1
                    s.input_chars[k].append(len(json.dumps(b.get("input", {}), ensure_ascii=False)))
        else:
            c = msg.get("content")
            if isinstance(c, str) or (isinstance(c, list) and any(b.get("type") == "text" for b in c)
                                      and not any(b.get("type") == "tool_result" for b in c)):
                if o.get("isMeta") or _text_of(c).startswith(("<command-", "<local-command", "Caveat:")):
                    continue
                events.append((t, "user", ""))
                continue
            for b in c or []:
                if b.get("type") == "tool_result" and b.get("tool_use_id") in kinds:
                    s.result_chars[kinds[b["tool_use_id"]]].append(len(_text_of(b.get("content"))))
    _turns(events, calls, s)
    s.sources.append(str(path.name))


def _turns(events: list[tuple[float, str, str]], calls: dict[str, dict], s: Sample) -> None:
    events.sort(key=lambda e: e[0])
    n_in_turn, last_call_t = 0, None
    for t, what, key in events:
        if what == "user":
            if n_in_turn:
                s.calls_per_turn.append(n_in_turn)
                if last_call_t is not None:
                    s.user_gaps.append(t - last_call_t)
            n_in_turn = 0
            last_call_t = None
            continue
        s.parallel.append(calls[key]["tools"])
        if last_call_t is not None:
            s.call_gaps.append(t - last_call_t)
        last_call_t = t
        n_in_turn += 1
    if n_in_turn:
        s.calls_per_turn.append(n_in_turn)


def read_codex(path: Path, s: Sample) -> None:
    """A Codex rollout: response items; function_call / function_call_output paired by call_id."""
    kinds: dict[str, str] = {}
    calls: dict[str, dict] = {}
    events: list[tuple[float, str, str]] = []
    current: str | None = None
    n = 0
    for raw in path.open(encoding="utf-8"):
        o = json.loads(raw)
        p = o.get("payload") or {}
        t = _ts(o["timestamp"])
        typ = p.get("type")
        if o.get("type") == "event_msg" and typ == "user_message":
            events.append((t, "user", ""))
            current = None
        elif o.get("type") == "response_item" and typ in ("function_call", "custom_tool_call", "message",
                                                          "reasoning", "web_search_call"):
            if typ == "message" and p.get("role") != "assistant":
                continue
            if current is None:
                n += 1
                current = f"c{n}"
                calls[current] = {"t": t, "tools": 0}
                events.append((t, "call", current))
            if typ in ("function_call", "custom_tool_call"):
                calls[current]["tools"] += 1
                try:
                    args = json.loads(p.get("arguments") or "{}")
                except json.JSONDecodeError:
                    args = {}
                cmd = args.get("cmd") or args.get("command") or ""
                if isinstance(cmd, list):
                    cmd = " ".join(cmd[-1:]) if cmd[:2] == ["bash", "-lc"] else " ".join(cmd)
                k = "edit" if typ == "custom_tool_call" else kind_of_command(str(cmd))
                kinds[p.get("call_id", "")] = k
                s.tool_calls[k] += 1
        elif o.get("type") == "response_item" and typ in ("function_call_output", "custom_tool_call_output"):
            current = None  # the next model output is a new call
            out = p.get("output")
            if isinstance(out, dict):
                out = out.get("output", "")
            k = kinds.get(p.get("call_id", ""))
            if k:
                s.result_chars[k].append(len(_text_of(out) if not isinstance(out, str) else out))
    _turns(events, calls, s)
    s.sources.append(str(path.name))


def read_swe_agent(path: Path, s: Sample) -> None:
    """A SWE-agent trajectory: one action (a shell-like command) and its observation per step."""
    o = json.loads(path.read_text(encoding="utf-8"))
    for step in o.get("trajectory", []):
        k = kind_of_command(step.get("action", ""))
        s.tool_calls[k] += 1
        s.result_chars[k].append(len(step.get("observation") or ""))
        s.parallel.append(1)
    s.sources.append(str(path.name))


def collect(real_dir: Path) -> Sample:
    real_dir = Path(real_dir)
    if not real_dir.is_dir():
        raise FileNotFoundError(f"{real_dir}: no such directory (the real logs are read in place)")
    s = Sample()
    for p in sorted((real_dir / "claude-code").glob("*/*.jsonl")):
        read_claude_code(p, s)
    for p in sorted((real_dir / "codex").glob("*.jsonl")):
        read_codex(p, s)
    for p in sorted((real_dir / "swe-agent").glob("*.traj")):
        read_swe_agent(p, s)
    return s


def lognormal_fit(xs: list[float] | np.ndarray) -> dict[str, float]:
    """Log-normal through the empirical median and 90th percentile (values < 1 clipped to 1)."""
    a = np.maximum(np.asarray(xs, dtype=float), 1.0)
    med, p90 = float(np.median(a)), float(np.quantile(a, 0.9))
    return {"n": int(a.size), "median": round(med, 1), "p90": round(p90, 1),
            "mu": round(float(np.log(med)), 4), "sigma": round(float((np.log(p90) - np.log(med)) / Z90), 4),
            "max": float(a.max())}


def fit(real_dir: Path) -> dict:
    """Every figure the generator uses, fitted on the real logs."""
    s = collect(real_dir)
    total = sum(s.tool_calls.values())
    par = Counter(s.parallel)
    n_calls = len(s.parallel)
    gaps = np.asarray(s.call_gaps)
    ugaps = np.asarray(s.user_gaps)
    return {
        "sources": s.sources,
        "tool_mix": {k: round(v / total, 4) for k, v in s.tool_calls.most_common()},
        "tool_calls": dict(s.tool_calls.most_common()),
        "result_chars": {k: lognormal_fit(v) for k, v in sorted(s.result_chars.items()) if len(v) >= 5},
        "input_chars": {k: lognormal_fit(v) for k, v in sorted(s.input_chars.items()) if len(v) >= 5},
        "assistant_text_chars": lognormal_fit(s.text_chars) if s.text_chars else {},
        "parallel": {str(k): round(v / n_calls, 4) for k, v in sorted(par.items())},
        "calls_per_turn": lognormal_fit(s.calls_per_turn) if s.calls_per_turn else {},
        "call_gap_s": lognormal_fit(gaps) if gaps.size else {},
        "call_gap_over_300s": round(float((gaps > 300).mean()), 4) if gaps.size else 0.0,
        "user_gap_s": lognormal_fit(ugaps) if ugaps.size else {},
        "user_gap_over_300s": round(float((ugaps > 300).mean()), 4) if ugaps.size else 0.0,
        "all_gaps_over_300s": int((gaps > 300).sum() + (ugaps > 300).sum()),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    real = Path(argv[0]) if argv else default_real_dir()
    print(json.dumps(fit(real), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
