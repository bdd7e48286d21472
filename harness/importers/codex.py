"""OpenAI Codex CLI rollouts (``~/.codex/sessions/.../rollout-*.jsonl``) to a trace.

Facts of the format (read off ``shared/traces/real/codex``, Codex CLI 0.125.0, gpt-5.5):

* every line is ``{timestamp, type, payload}``; ``session_meta`` carries ``base_instructions.text``
  (the system prompt) and ``turn_context`` the ``model``;
* ``response_item`` lines are what the model sees: ``message`` (role developer / user /
  assistant), ``reasoning`` (encrypted; only its ``summary`` text is readable), ``function_call`` /
  ``custom_tool_call`` (a tool use, joined to its ``*_output`` by ``call_id``),
  ``web_search_call`` (a server-side tool: no output item);
* a model call's items are followed by one ``event_msg``/``token_count`` whose
  ``info.last_token_usage`` is that call's usage: ``input_tokens`` *includes*
  ``cached_input_tokens`` (OpenAI convention, normalised here: N-CACHE-5). The same token_count is
  sometimes logged twice (the running ``total_token_usage`` does not move): duplicates are dropped
  and counted; a token_count with no ``info`` (rate limits only) is not a call;
* ``compacted`` items (Codex's own compaction) carry the replacement history's summary message;
* the other ``event_msg`` kinds (``user_message``/``agent_message`` mirror response items,
  ``exec_command_end``, ``task_started``...) are not sent to the model: ignored and counted;
* a forked thread's rollout (a fork, a sub-agent given its parent's history) holds a copy of the parent's
  items after a session_meta of another thread (:data:`COPY_GAP_S`): history it starts from. Its calls are
  marked ``copied`` (not billed here: the parent's file bills them) and a compaction in it replaces the
  history with no call of this thread's.

Current versions (issue 27: a Codex Desktop 0.128 alpha rollout) may log no ``token_count`` at
all. Then each model call is the run of output items (reasoning, messages, tool calls) the rollout
writes between two inputs: a tool output or a user message closes it, so parallel tool calls stay
one call and sequential ones are separate calls, in the rollout's order. Usage is "not recorded"
(``header.usage = "none"``: cost is simulated, and the notes say so). A rollout whose user
turns are only ``event_msg/user_message`` (no ``response_item`` user message) keeps them from
there. The model is ``turn_context.model`` (else ``session_meta.model``, else the collaboration
mode's), never a default; the session's ``cwd`` is kept in ``header.source`` (the project a folder
import names).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ctxsim.harness.importers.common import (
    SHAPE_ERRORS,
    ImportResult,
    SkippedLine,
    TraceBuilder,
    count,
    finalize,
    flatten_content,
    iso_time,
    models_by_role,
    notes_from,
    parse_time,
    read_jsonl,
    shape_error,
)
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.trace import NoModelCalls, TraceError

FORMAT = "codex"
# A forked thread's rollout (``codex fork``, a sub-agent spawned with its parent's history) opens with its own
# session_meta and then holds its parent's rollout items, the parent's session_meta first: Codex persists the
# forked history "as-is" (openai/codex codex-rs/core/src/codex.rs at 001cb8e, record_initial_history,
# InitialHistory::Forked), each line stamped as it is written (codex-rs/core/src/rollout/recorder.rs at a9c11b5,
# JsonlWriter::write_rollout_item). So the copy is one burst of lines; the thread's own next line follows a
# model call or a command. Assumed: lines of one burst are at most this far apart (each is flushed on its own,
# microseconds apart); a thread's own lines are further apart.
COPY_GAP_S = 0.05
TOOL_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
TOOL_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def _usage(u: dict[str, Any], path: Path, line: int) -> tr.RecordedUsage:
    if not isinstance(u, dict):
        raise TraceError(path, line, "token_count info.last_token_usage must be an object of token counts")
    total_in = count(u.get("input_tokens"), "last_token_usage.input_tokens", path, line)
    cached = count(u.get("cached_input_tokens"), "last_token_usage.cached_input_tokens", path, line)
    output = count(u.get("output_tokens"), "last_token_usage.output_tokens", path, line)
    for k in ("reasoning_output_tokens", "total_tokens"):   # not billed apart, but a damaged one is damage
        count(u.get(k), f"last_token_usage.{k}", path, line)
    return tr.RecordedUsage(input=max(0, total_in - cached), cache_read=cached, output=output)


def _text(content: Any) -> str:
    if isinstance(content, list):
        parts = [str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b]
        other = [b for b in content if not (isinstance(b, dict) and "text" in b)]
        if other:
            parts.append(flatten_content(other)[0])
        return "\n".join(parts)
    return flatten_content(content)[0]


def _prescan(src: Path) -> tuple[bool, bool]:
    """(the rollout logs per-call usage, it logs user turns as response items)."""
    counts = user_items = False
    for _, o in read_jsonl(src, []):   # a damaged line is reported by the import itself
        p = o.get("payload") if isinstance(o, dict) else None
        if not isinstance(p, dict):
            continue
        info = p.get("info")
        if o.get("type") == "event_msg" and p.get("type") == "token_count" and isinstance(info, dict) \
                and info.get("last_token_usage"):
            counts = True
        elif o.get("type") == "response_item" and p.get("type") == "message" and p.get("role") == "user":
            user_items = True
    return counts, user_items


def _model_of(p: dict[str, Any]) -> str | None:
    m = p.get("model")
    if isinstance(m, str) and m:
        return m
    mode = p.get("collaboration_mode")
    m = ((mode or {}).get("settings") or {}).get("model") if isinstance(mode, dict) else None
    return m if isinstance(m, str) and m else None


def _copied_tokens(events: list[Any], tok: Any) -> int:
    """cl100k tokens of the answers and tool outputs a fork copied in before this thread's first call (its
    user messages are in ``before_first``): the first call's input holds them, so they are no hidden prefix."""
    n = 0
    for e in events:
        if tr.is_call(e):
            break
        if isinstance(e, (tr.AssistantEvent, tr.ToolResultEvent)):
            n += tok.count(tr.content_text(e)) + 4
    return n


def import_codex(src: str | Path) -> ImportResult:
    src = Path(src)
    has_usage, user_items = _prescan(src)
    cwd: str | None = None
    b = TraceBuilder(str(src))
    ignored: Counter = Counter()
    counts: Counter = Counter()
    system = ""
    model: str | None = None
    version: str | None = None
    route: str | None = None        # session_meta.model_provider: who served the calls (openai, ollama, ...)
    pending: list[Any] = []          # assistant content of the call in progress
    pending_t: float | None = None
    held: list[tuple[float, str, str]] = []  # tool outputs logged before their call's token_count
    last_total: Any = None
    first_usage: tr.RecordedUsage | None = None
    before_first: list[str] = []     # visible messages the first call sent
    saw_meta = False
    windows: Counter = Counter()     # token_count.info.model_context_window values seen
    own_id: str | None = None        # the thread this rollout records (its first session_meta's id)
    copy_of: str | None = None       # in a copied burst: the thread it came from (COPY_GAP_S)
    copy_t = 0.0                     # the burst's last line's time

    def flush(usage: tr.RecordedUsage | None, t: float) -> None:
        nonlocal pending, pending_t, first_usage
        if not pending and usage is None:
            return
        if not pending:
            counts["token_count with no output items (kept as an empty call)"] += 1
        copied = copy_of is not None
        b.assistant(pending_t if pending_t is not None else t, pending or [tr.TextContent(text="")], usage, model=model,
                    copied=copied, **({"copied_from": copy_of} if copied else {}))
        if copied:
            counts[f"calls copied in from thread {copy_of} (a fork's history: not billed here)"] += 1
        elif first_usage is None and usage is not None:
            first_usage = usage
        pending, pending_t = [], None
        for ht, cid, out in held:
            b.tool_result(ht, cid, out)
        held.clear()

    def read(line: int, o: dict[str, Any]) -> None:
        """One rollout line. A line that cannot be read raises before it changes the trace."""
        nonlocal system, version, model, cwd, saw_meta, last_total, pending_t, own_id, copy_of, copy_t, route
        kind, p = o.get("type"), o.get("payload")
        if not isinstance(kind, str) or not isinstance(p, dict):
            raise TraceError(src, line, "not a Codex rollout line (expected {timestamp, type, payload})")
        t = parse_time(o.get("timestamp"), src, line)
        if copy_of is not None:
            if t - copy_t > COPY_GAP_S:   # the burst is over: what it left open is the copy's, the rest this thread's
                flush(None, copy_t) if pending else None
                copy_of = None
            else:
                copy_t = t
        if kind == "session_meta":
            sid = p.get("id")
            if own_id is not None and isinstance(sid, str) and sid != own_id:   # another thread's items follow
                flush(None, t) if pending else None
                copy_of, copy_t = sid, t
                counts[f"history copied in from thread {sid} (a fork: its items are this thread's start)"] += 1
                return
            own_id = own_id or (sid if isinstance(sid, str) else None)
            saw_meta = True
            bi = p.get("base_instructions")
            system = system or (bi.get("text") if isinstance(bi, dict) else bi) or ""
            version = version or p.get("cli_version")
            mp = p.get("model_provider")
            route = route or (mp if isinstance(mp, str) and mp else None)
            model = model or _model_of(p)
            cwd = cwd or (p.get("cwd") if isinstance(p.get("cwd"), str) else None)
            return
        if kind == "turn_context":
            model = _model_of(p) or model
            cwd = cwd or (p.get("cwd") if isinstance(p.get("cwd"), str) else None)
            return
        if kind == "compacted":
            flush(None, t)
            # in a copy: the parent's compaction, which shaped the history this thread starts from (no call here)
            b.compact(t, "auto", None, str(p.get("message") or "") or None, None,
                      **({"no_call": True} if copy_of is not None else {}))
            return
        if kind == "event_msg":
            if p.get("type") == "token_count":
                info = p.get("info")
                if not info or not info.get("last_token_usage"):
                    ignored["token_count without usage (rate limits only)"] += 1
                    return
                usage = _usage(info["last_token_usage"], src, line)
                w = (count(info["model_context_window"], "info.model_context_window", src, line)
                     if info.get("model_context_window") is not None else 0)
                if w > 0:
                    windows[w] += 1
                total = info.get("total_token_usage")
                if total is not None and total == last_total:
                    counts["duplicate token_count dropped"] += 1
                    return
                last_total = total
                flush(usage, t)
            elif p.get("type") == "user_message" and not user_items and isinstance(p.get("message"), str):
                if pending:
                    flush(None, t)
                b.user(t, p["message"])
                counts["user turns kept from event_msg/user_message (no user response items)"] += 1
                if b.calls == 0:
                    before_first.append(p["message"])
            else:
                ignored[f"event_msg/{p.get('type')}"] += 1
            return
        if kind != "response_item":
            ignored[kind] += 1
            return
        item = p.get("type")
        if item == "message":
            role = p.get("role")
            text = _text(p.get("content"))
            if role == "assistant":
                pending_t = t if pending_t is None else pending_t
                pending.append(tr.TextContent(text=text))
            elif role in ("user", "developer", "system"):
                flush(None, t) if pending else None
                b.user(t, text, **({"role": role} if role != "user" else {}))
                if b.calls == 0:
                    before_first.append(text)
            else:
                raise TraceError(src, line, f"message with unknown role {role!r}")
        elif item == "reasoning":
            summary = "\n".join(str(s.get("text", "")) for s in p.get("summary") or [] if isinstance(s, dict))
            pending_t = t if pending_t is None else pending_t
            if p.get("encrypted_content"):
                counts["encrypted reasoning (its tokens have no text here)"] += 1
            pending.append(tr.ThinkingContent(thinking=summary))
        elif item in TOOL_CALLS:
            cid = p.get("call_id") or p.get("id")
            if not cid or not isinstance(cid, str):
                raise TraceError(src, line, f"{item} without call_id" if not cid else f"{item} whose call_id is "
                                 f"{type(cid).__name__}, not a string")
            pending_t = t if pending_t is None else pending_t
            raw = p.get("arguments", p.get("input", p.get("action")))
            name = p.get("name")
            if name is not None and not isinstance(name, str):   # str() would name the tool "[1, 2]"
                raise TraceError(src, line, f"{item} whose name is {type(name).__name__}, not a string")
            if raw is not None and not isinstance(raw, (str, dict)):   # Codex writes a JSON string or an object
                raise TraceError(src, line, f"{item} whose arguments are {type(raw).__name__}, not a string or an object")
            if isinstance(raw, str):
                try:
                    args = json.loads(raw)
                except json.JSONDecodeError:
                    args = {"input": raw}
            else:
                args = raw if isinstance(raw, dict) else {"input": raw}
            if not isinstance(args, dict):
                args = {"input": args}
            pending.append(tr.ToolUseContent(id=cid, name=name or item, input=args))
        elif item == "web_search_call":
            action = p.get("action") or {}
            text = f"[web_search_call] {action.get('query', '')}"
            pending_t = t if pending_t is None else pending_t
            pending.append(tr.TextContent(text=text))
        elif item in TOOL_OUTPUTS:
            cid = p.get("call_id") or ""
            if not isinstance(cid, str):   # str() would answer a call nobody made
                raise TraceError(src, line, f"{item} whose call_id is {type(cid).__name__}, not a string")
            out = p.get("output")
            out = out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
            if pending and not has_usage:   # no token_count: a tool output closes the call in progress
                flush(None, t)
            if pending:
                held.append((t, cid, out))
            else:
                b.tool_result(t, cid, out)
        else:
            ignored[f"response_item/{item}"] += 1

    # a line that is not JSON (a rollout cut off while Codex was writing it) or a record of a shape Codex
    # never writes is skipped with a warning naming it, as for Claude Code logs; a file none of whose
    # lines reads as a Codex rollout fails at its first bad line
    skipped: list[SkippedLine] = []
    bad: list[SkippedLine] = []
    records = 0
    for line, o in read_jsonl(src, skipped):
        records += 1
        try:
            read(line, o)
        except TraceError as e:
            bad.append(SkippedLine(src, line, e.what))
        except SHAPE_ERRORS as e:
            bad.append(SkippedLine(src, line, shape_error(FORMAT, e)))
    skipped = sorted(skipped + bad, key=lambda sk: sk.line)
    if skipped and not (b.calls or (saw_meta and pending)):
        raise TraceError(src, skipped[0].line, skipped[0].reason)
    flush(None, 0.0) if pending else None
    for ht, cid, out in held:
        b.tool_result(ht, cid, out)
    b.finish()  # repair a call left open at the end before the summary counts repairs
    if not saw_meta and b.calls == 0:
        if not records and not skipped:   # a rollout created and never written: nothing billed, nothing lost
            raise NoModelCalls(src, None, "empty file: no records: nothing to replay")
        raise TraceError(src, None, "no session_meta and no model calls: not a Codex rollout")
    if b.calls == 0:
        raise NoModelCalls(src, None, "no model calls (no output items): nothing to replay")

    from ctxsim.harness.provider.tokenizer import get_tokenizer

    tok = get_tokenizer()
    visible = tok.count(system) + sum(tok.count(x) + 4 for x in before_first) + _copied_tokens(b.events, tok)
    prefix = max(0, first_usage.context_tokens - visible) if first_usage else 0
    repairs = Counter(b.counts) + counts
    if windows:
        window = max(windows)
        window_ev = f"token_count.info.model_context_window = {window:,} ({windows[window]} of {sum(windows.values())} token counts)"
    else:
        window, window_ev = None, "not recorded (no token_count.info.model_context_window)"
    recorded = tr.RecordedSetting(models=models_by_role(b.events), window=window, window_evidence=window_ev,
                                  cache_ttl=None, cache_ttl_evidence="automatic prompt caching (OpenAI): no TTL is written")
    header = tr.Header(
        name=src.stem, model=model, system=system, prefix_tokens=prefix, usage="per_call" if has_usage else "none",
        source={"format": FORMAT, "path": str(src), "version": version, "start": iso_time(b.t0),
                **({"cwd": cwd} if cwd else {}), **({"thread": own_id} if own_id else {}),
                **({"route": route} if route else {})}, recorded=recorded,
        notes=notes_from(ignored, repairs, [
            f"Codex CLI {version}" if version else "Codex CLI",
            "usage: token_count.last_token_usage per call; input_tokens include cached_input_tokens (normalised)"
            if has_usage else "usage: not recorded (no token_count events): cost is simulated, not billed",
            *([] if model else ["model: not recorded (no turn_context/session_meta model): run needs --model"]),
            "prefix_tokens = first call's recorded input − cl100k tokens of the instructions and first messages "
            "(the tools array is not in the log)"]),
        meta={"first_call_context": first_usage.context_tokens if first_usage else 0, "prefix_tokens_scale": 1.0},
    )
    tool_uses = sum(len(e.tool_uses()) for e in b.events if isinstance(e, tr.AssistantEvent))
    summary = {"source": str(src), "format": FORMAT, "version": version, "model": model, "route": route, "calls": b.calls,
               "usage": "per call" if has_usage else "not recorded (cost simulated)", "cwd": cwd,
               "tool_uses": tool_uses, "compactions": sum(1 for e in b.events if isinstance(e, tr.CompactEvent)),
               "prefix_tokens": prefix, "ignored": dict(sorted(ignored.items())), "repairs": dict(sorted(repairs.items())),
               "skipped_lines": len(skipped)}
    return finalize(header, b, summary, [f"{sk} (line skipped)" for sk in skipped])
