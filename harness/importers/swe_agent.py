"""SWE-agent trajectories (``*.traj``, one JSON document) to a trace.

Facts of the format (``shared/traces/real/swe-agent``, SWE-agent 0.x and 1.x):

* ``history`` is the message list the agent kept: ``system`` (the system prompt), ``user`` (the
  task, demonstrations marked ``is_demo``, and — in the older text-action format — each
  observation), ``assistant`` (the thought and action; with function calling, ``tool_calls``), and
  ``tool`` (an observation answering ``tool_call_ids``);
* in the text-action format (0.x, ``pydicom__pydicom-1458``) an assistant message carries its
  ``action`` (one shell line or command block, run in the container's bash session, where
  SWE-agent's own commands are shell functions) and the next ``user`` message is its observation.
  Each such action becomes a ``bash`` tool_use (input ``command``: the action; the message's text:
  its ``thought``) and the observation its tool_result, so the trace has the shape a function-calling
  log has and masking strategies see observations as what they are. Counted in the summary;
* the task is the first user message after the demonstrations: SWE-agent's instance template with
  the issue inside it (``ISSUE:`` … ``INSTRUCTIONS:`` in the 0.x and early 1.x templates, as both
  bundled files show; ``<pr_description>`` … ``</pr_description>`` in the 1.x default config). It is
  split, with no character lost, into the template's head, the issue statement and the template's
  tail; head, tail and demonstrations carry ``meta.origin`` (``task_template``, ``demonstration``):
  the harness wrote them, the user did not, so the goal a derivation finds is the issue's first line,
  not "Here is a demonstration…";
* ``trajectory`` is one step per model call (``response``, ``observation``, and from 1.x
  ``execution_time``). When it has more steps than ``history`` has assistant messages (the final
  ``submit`` step is not always in the history) the missing steps are appended from it, counted;
* usage is only the aggregate ``info.model_stats`` (tokens_sent, tokens_received, api_calls,
  instance_cost): the header says ``usage: aggregate`` and keeps the totals in ``meta``. There are
  no timestamps: the clock is the cumulative ``execution_time`` where present (else 0).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from ctxsim.harness.importers.common import (
    ImportResult,
    TraceBuilder,
    count,
    finalize,
    flatten_content,
    notes_from,
    read_json_doc,
    seconds,
)
from ctxsim.harness.importers.task import task_parts
from ctxsim.harness.model import trace as tr

FORMAT = "swe-agent"
MAX_COST = 1_000_000   # assumed: dollars in one trajectory's model_stats; more is a damaged value
SHELL_TOOL = "bash"    # SWE-agent 1.x names its shell tool ``bash`` (6e44b9__sweagenttestrepo-1c2844.traj)
DEMONSTRATION = "demonstration"


def _args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return {"input": raw}
    return raw if isinstance(raw, dict) else {"input": raw}


def import_swe_agent(src: str | Path) -> ImportResult:
    src = Path(src)
    jd = read_json_doc(src)
    doc = jd.value
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list) or "trajectory" not in doc:
        raise jd.error((), "not a SWE-agent trajectory (expected an object with 'history' and 'trajectory')")
    history: list[dict[str, Any]] = doc["history"]
    steps: list[dict[str, Any]] = doc.get("trajectory") or []
    info = doc.get("info") or {}
    stats = info.get("model_stats") or {}
    if not isinstance(steps, list) or not isinstance(info, dict) or not isinstance(stats, dict):
        raise jd.error(("trajectory",) if not isinstance(steps, list) else ("info",),
                       "trajectory must be a list of steps, info.model_stats an object")
    for key in ("tokens_sent", "tokens_received", "api_calls"):
        if key in stats:
            count(stats[key], f"info.model_stats.{key}", src, *jd.at("info", "model_stats", key))
    for key in ("instance_cost", "total_cost"):
        v = stats.get(key)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
                              or not 0 <= v <= MAX_COST):
            raise jd.error(("info", "model_stats", key), f"info.model_stats.{key} is {v!r}: expected dollars "
                           f"between 0 and {MAX_COST:,}")
    b = TraceBuilder(str(src))
    counts: Counter = Counter()
    ignored: Counter = Counter()
    system = ""
    clock = 0.0
    step_times = []
    for i, s in enumerate(steps):
        jd.cursor("trajectory", i)
        if not isinstance(s, dict):
            raise jd.error(("trajectory", i), f"trajectory[{i}] is not a step object")
        clock += seconds(s.get("execution_time"), f"trajectory[{i}].execution_time", src,
                         *jd.at("trajectory", i, "execution_time"))
        step_times.append(clock)
    n_assistant = 0
    pending_ids: list[str] = []
    pending_action: str | None = None   # tool_use id of a text action whose observation comes next
    task_seen = False
    paired = 0

    def step_t(i: int) -> float:
        return step_times[i - 1] if 0 < i <= len(step_times) else (step_times[-1] if step_times and i > 0 else 0.0)

    def close_from_trajectory(tid: str | None, step: int) -> int:
        """An action the history leaves without an observation (the final ``submit``) gets the one its
        trajectory step recorded; 1 if it did."""
        obs = steps[step].get("observation") if tid is not None and 0 <= step < len(steps) else None
        if not obs:
            return 0
        b.tool_result(step_t(step + 1), tid, str(obs))
        counts["observations taken from the trajectory (not in the history)"] += 1
        return 1

    def action_call(t: float, thought: str, action: str) -> str:
        tid = f"swe-action-{n_assistant + 1}"
        content: list[Any] = [tr.TextContent(text=thought)] if thought.strip() else []
        content.append(tr.ToolUseContent(id=tid, name=SHELL_TOOL, input={"command": action.strip("\n")}))
        b.assistant(t, content, None)
        return tid

    for k, m in enumerate(history):
        jd.cursor("history", k)
        if not isinstance(m, dict) or "role" not in m:
            raise jd.error(("history", k), f"history[{k}] is not a message (no role)")
        role = m["role"]
        text, dropped = flatten_content(m.get("content"))
        counts.update({f"{x} content replaced by a placeholder": v for x, v in dropped.items()})
        if role == "system":
            if b.calls or system:
                b.user(step_t(n_assistant), text, role="system")
            else:
                system = text
        elif role == "user":
            t = step_t(n_assistant)
            if m.get("is_demo"):
                b.user(t, text, demo=True, origin=DEMONSTRATION)
            elif pending_action is not None:
                b.tool_result(t, pending_action, text)
                paired += 1
            elif not task_seen and b.calls == 0:
                task_seen = True
                for part, meta in task_parts(text):
                    b.user(t, part, **meta)
            else:
                b.user(t, text)
            pending_action = None
        elif role == "assistant":
            calls = m.get("tool_calls") or []
            action = m.get("action")
            paired += close_from_trajectory(pending_action, n_assistant - 1)
            pending_action = None
            if not calls and isinstance(action, str) and action.strip():
                thought = m.get("thought")
                pending_action = action_call(step_t(n_assistant), thought if isinstance(thought, str) else text, action)
                n_assistant += 1
                pending_ids = []
                continue
            content: list[Any] = [tr.TextContent(text=text)] if text else []
            for c in calls:
                fn = c.get("function") or {}
                if not c.get("id") or not fn.get("name"):
                    raise jd.error(("history", k), f"history[{k}]: tool call without id or function name")
                content.append(tr.ToolUseContent(id=str(c["id"]), name=str(fn["name"]), input=_args(fn.get("arguments"))))
            b.assistant(step_t(n_assistant), content, None)
            n_assistant += 1
            pending_ids = [c.id for c in content if isinstance(c, tr.ToolUseContent)]
        elif role == "tool":
            ids = m.get("tool_call_ids") or ([m["tool_call_id"]] if m.get("tool_call_id") else pending_ids[:1])
            for tid in ids:
                paired += b.tool_result(step_t(n_assistant), str(tid), text)
        else:
            ignored[f"history role {role}"] += 1
    paired += close_from_trajectory(pending_action, n_assistant - 1)
    for i in range(n_assistant, len(steps)):   # steps the history does not hold (the final submit)
        s = steps[i]
        counts["trajectory steps missing from history (appended from trajectory)"] += 1
        action = s.get("action")
        thought = s.get("thought") if isinstance(s.get("thought"), str) else str(s.get("response") or "")
        if isinstance(action, str) and action.strip():
            tid = action_call(step_t(i), thought, action)
            n_assistant += 1
            if s.get("observation"):
                b.tool_result(step_t(i + 1), tid, str(s["observation"]))
                paired += 1
        else:
            b.assistant(step_t(i), [tr.TextContent(text=str(s.get("response") or ""))], None)
            n_assistant += 1
            if s.get("observation"):
                b.user(step_t(i + 1), str(s["observation"]))
    b.finish()  # repair a call left open at the end before the summary counts repairs
    if b.calls == 0:
        raise jd.error((), "no assistant messages and no trajectory steps: nothing to replay")
    api_calls = stats.get("api_calls")
    extra = ["usage: aggregate only (info.model_stats); no per-call usage to compare",
             "no timestamps: the clock is the cumulative execution_time of the steps" if any(step_times)
             else "no timestamps and no execution_time: every event at t=0",
             f"{paired} observations are tool results paired with their actions (text actions: a {SHELL_TOOL} "
             "tool_use each); the task's instance template is split around the issue statement"]
    if api_calls is not None and api_calls != b.calls:
        extra.append(f"model_stats.api_calls = {api_calls} but the trace has {b.calls} calls")
    header = tr.Header(
        name=src.stem, model=None, system=system, usage="aggregate",
        source={"format": FORMAT, "path": str(src), "environment": doc.get("environment")},
        notes=notes_from(ignored, Counter(b.counts) + counts, extra),
        meta={"aggregate_usage": {k: stats[k] for k in ("tokens_sent", "tokens_received", "api_calls",
                                                       "instance_cost", "total_cost") if k in stats},
              "exit_status": info.get("exit_status")},
    )
    tool_uses = sum(len(e.tool_uses()) for e in b.events if isinstance(e, tr.AssistantEvent))
    summary = {"source": str(src), "format": FORMAT, "calls": b.calls, "tool_uses": tool_uses,
               "observations_paired": paired, "compactions": 0,
               "usage": "aggregate", "aggregate": header.meta["aggregate_usage"],
               "ignored": dict(sorted(ignored.items())), "repairs": dict(sorted((Counter(b.counts) + counts).items()))}
    return finalize(header, b, summary)
