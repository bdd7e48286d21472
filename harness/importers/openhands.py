"""OpenHands event streams (a JSON list of events, as saved by the V0 server and its tests) to a
trace.

Facts of the format (``shared/traces/real/openhands``, OpenHands V0, Claude 3.5 Sonnet):

* ``source: user`` + ``action: message`` is the user's text (``args.content``);
* an agent action carries ``tool_call_metadata``: the tool call id and name, and the whole
  ``model_response`` of the call that produced it — with ``usage`` (litellm's shape:
  ``prompt_tokens`` *includes* ``cache_creation_input_tokens`` and ``cache_read_input_tokens``;
  normalised here, N-CACHE-5). Several actions of one response share ``model_response.id``: they
  are one call;
* an observation with ``cause`` and the same ``tool_call_metadata`` is the tool result
  (``content``, else ``message``);
* an agent action on the environment without metadata (``run``, ``edit``… in streams written before
  function calling, :data:`ENV_ACTIONS`) is a call of its own with one tool_use (id
  ``openhands-<event id>``, name the action, input its ``args`` without ``thought``, text the
  thought), and the observation whose ``cause`` is that action's id its tool_result: observations
  are always tool results paired with their actions, so masking strategies act on them;
* the first user message is split around the issue statement when it wraps one in a benchmark
  template (``<issue_description>``, :mod:`ctxsim.harness.importers.task`), so the goal is the issue;
* an agent ``message`` action without metadata is a final answer (a call whose usage was not
  logged); environment events (agent state changes, null observations) are not sent to the model:
  ignored and counted.
The system prompt and tool schemas are not in the stream: ``prefix_tokens`` comes from the first
call's usage.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ctxsim.harness.importers.common import (
    ImportResult,
    JsonDoc,
    TraceBuilder,
    count,
    finalize,
    notes_from,
    parse_time,
    read_json_doc,
)
from ctxsim.harness.importers.task import task_parts
from ctxsim.harness.model import trace as tr

FORMAT = "openhands"
# OpenHands V0 openhands/core/schema/action.py ActionType values of actions run in the sandbox
ENV_ACTIONS = frozenset({"run", "run_ipython", "read", "write", "edit", "browse", "browse_interactive"})


def _obj(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            return v
    return v


def _usage(u: Any, doc: JsonDoc, node: tuple) -> tr.RecordedUsage:
    def c(*key: str) -> int:
        parent = u
        for k in key[:-1]:
            parent = parent.get(k) if isinstance(parent, dict) else None
        if parent is None:
            return 0
        if not isinstance(parent, dict):
            raise doc.error(node + key[:-1], f"usage.{'.'.join(key[:-1])} must be an object of token counts")
        line, col = doc.at(*node, *key)
        return count(parent.get(key[-1]), "usage." + ".".join(key), doc.path, line, col)

    if not isinstance(u, dict):
        raise doc.error(node, "model_response.usage must be an object of token counts")
    prompt, write = c("prompt_tokens"), c("cache_creation_input_tokens")
    read = c("cache_read_input_tokens") or c("prompt_tokens_details", "cached_tokens")
    return tr.RecordedUsage(input=max(0, prompt - write - read), cache_write_5m=write, cache_read=read,
                            output=c("completion_tokens"))


def import_openhands(src: str | Path) -> ImportResult:
    src = Path(src)
    jd = read_json_doc(src)
    doc = jd.value
    events = doc.get("events") if isinstance(doc, dict) else doc
    pre: tuple = ("events",) if isinstance(doc, dict) else ()
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        bad = next((k for k, e in enumerate(events) if not isinstance(e, dict)), None) \
            if isinstance(events, list) else None
        raise jd.error(pre + ((bad,) if bad is not None else ()),
                       "not an OpenHands event stream (expected a JSON list of event objects)")
    b = TraceBuilder(str(src))
    ignored: Counter = Counter()
    counts: Counter = Counter()
    models: Counter = Counter()
    calls: dict[str, dict[str, Any]] = {}   # model_response.id -> the call being assembled
    order: list[tuple[str, Any]] = []
    first_usage: tr.RecordedUsage | None = None
    before_first: list[str] = []
    bare: dict[Any, str] = {}   # event id of an action without metadata -> its tool_use id
    for k, e in enumerate(events):
        jd.cursor(*pre, k)
        if "id" not in e or "timestamp" not in e:
            raise jd.error(pre + (k,), f"event #{k} has no id or timestamp: not an OpenHands event")
        t = parse_time(e["timestamp"], src, *jd.at(*pre, k, "timestamp"))
        meta = _obj(e.get("tool_call_metadata"))
        args = _obj(e.get("args")) or {}
        if e.get("action") == "message" and e.get("source") in ("user", "agent") \
                and not (isinstance(args, dict) and isinstance(args.get("content"), str)):
            # OpenHands' MessageAction always carries its text: str() would send "None" or "5" as the message
            raise jd.error(pre + (k, "args"), f"event #{k}: a message from the {e['source']} whose args.content is not a string")
        if isinstance(meta, dict) and "action" in e and not isinstance(meta.get("function_name"), str):
            raise jd.error(pre + (k, "tool_call_metadata"),
                           f"event #{k}: tool_call_metadata.function_name is not a string (the tool the model called)")
        if e.get("source") == "user" and e.get("action") == "message":
            text = args["content"]
            first = not any(kind == "user" for kind, _ in order)
            for part, m in (task_parts(text) if first else [(text, {})]):
                order.append(("user", (t, part, m)))
        elif "action" in e and isinstance(meta, dict):
            resp = meta.get("model_response") or {}
            rid = str(resp.get("id") or meta.get("tool_call_id"))
            call = calls.get(rid)
            if call is None:
                msg = ((resp.get("choices") or [{}])[0].get("message") or {})
                call = calls[rid] = {"t": t, "text": msg.get("content") or "", "tools": [],
                                     "usage": _usage(resp["usage"], jd, pre + (k, "tool_call_metadata",
                                                     "model_response", "usage")) if resp.get("usage") else None,
                                     "model": resp.get("model")}
                order.append(("call", rid))
                models[resp.get("model") or "?"] += 1
            tid = str(meta.get("tool_call_id"))
            sent = next((c for c in ((resp.get("choices") or [{}])[0].get("message") or {}).get("tool_calls") or []
                         if c.get("id") == tid), None)
            if sent is not None:   # the arguments the model produced (the action's args are OpenHands' own)
                tool_args = _obj((sent.get("function") or {}).get("arguments"))
            else:
                counts["tool call not in its model_response (action args used)"] += 1
                tool_args = {k: v for k, v in (args if isinstance(args, dict) else {"input": args}).items() if k != "thought"}
            call["tools"].append(tr.ToolUseContent(id=tid, name=meta["function_name"],
                                                   input=tool_args if isinstance(tool_args, dict) else {"input": tool_args}))
        elif e.get("source") == "agent" and e.get("action") in ENV_ACTIONS:
            a = args if isinstance(args, dict) else {"input": args}
            tid = bare[e["id"]] = f"openhands-{e['id']}"
            order.append(("bare", (t, str(a.get("thought") or ""), tr.ToolUseContent(
                id=tid, name=str(e["action"]), input={k: v for k, v in a.items() if k != "thought"}))))
            counts["actions without tool_call_metadata (a call with one tool_use each)"] += 1
        elif "observation" in e and e.get("cause") in bare and not isinstance(meta, dict):
            content = e.get("content")
            content = content if isinstance(content, str) and content else str(e.get("message") or "")
            order.append(("result", (t, bare[e["cause"]], content)))
        elif e.get("source") == "agent" and e.get("action") == "message":
            order.append(("final", (t, args["content"])))
        elif "observation" in e and isinstance(meta, dict) and e.get("cause") is not None:
            content = e.get("content")
            content = content if isinstance(content, str) and content else str(e.get("message") or "")
            order.append(("result", (t, str(meta.get("tool_call_id")), content)))
        else:
            ignored[f"{e.get('source', '?')}/{e.get('action') or e.get('observation') or '?'}"] += 1
    for kind, item in order:
        if kind == "user":
            b.user(item[0], item[1], **item[2])
            if b.calls == 0:
                before_first.append(item[1])
        elif kind == "call":
            c = calls[item]
            content = ([tr.TextContent(text=c["text"])] if c["text"] else []) + c["tools"]
            b.assistant(c["t"], content, c["usage"], model=c["model"])
            if first_usage is None and c["usage"] is not None:
                first_usage = c["usage"]
        elif kind == "bare":
            b.assistant(item[0], ([tr.TextContent(text=item[1])] if item[1] else []) + [item[2]], None)
        elif kind == "final":
            b.assistant(item[0], [tr.TextContent(text=item[1])], None)
            counts["final agent message without logged usage"] += 1
        else:
            b.tool_result(item[0], item[1], item[2])
    b.finish()  # repair a call left open at the end before the summary counts repairs
    if b.calls == 0:
        raise jd.error((), "no agent actions: nothing to replay")
    from ctxsim.harness.provider.tokenizer import get_tokenizer

    tok = get_tokenizer()
    prefix = max(0, first_usage.context_tokens - sum(tok.count(x) + 4 for x in before_first)) if first_usage else 0
    model = models.most_common(1)[0][0] if models else None
    repairs = Counter(b.counts) + counts
    header = tr.Header(
        name=src.stem, model=model, prefix_tokens=prefix, usage="per_call" if first_usage else "none",
        source={"format": FORMAT, "path": str(src)},
        notes=notes_from(ignored, repairs, [
            "usage: tool_call_metadata.model_response.usage per call (litellm: prompt_tokens include cache "
            "creation and reads; normalised)",
            "prefix_tokens = first call's recorded input − cl100k tokens of the user messages before it "
            "(system prompt and tools are not in the event stream)"]),
        meta={"first_call_context": first_usage.context_tokens if first_usage else 0, "prefix_tokens_scale": 1.0},
    )
    tool_uses = sum(len(e.tool_uses()) for e in b.events if isinstance(e, tr.AssistantEvent))
    summary = {"source": str(src), "format": FORMAT, "model": model, "calls": b.calls, "tool_uses": tool_uses,
               "compactions": 0, "prefix_tokens": prefix, "ignored": dict(sorted(ignored.items())),
               "repairs": dict(sorted(repairs.items()))}
    return finalize(header, b, summary)
