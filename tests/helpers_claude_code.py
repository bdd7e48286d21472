"""Hand-made Claude Code transcripts for tests: one record per line, as Claude Code writes them
(``~/.claude/projects/<project>/<session>.jsonl``). Built at test time, never committed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(ts: float, day: int = 0) -> str:
    """ISO timestamp ``ts`` seconds (plus ``day`` days) after 2026-01-01T00:00:00Z."""
    return (T0 + timedelta(days=day, seconds=ts)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def rec(kind, ts, session="s", day=0, **kw):
    return {"type": kind, "timestamp": stamp(ts, day), "sessionId": session, "version": "2.1.39",
            "isSidechain": False, **kw}


def usage(inp=3, w1h=0, w5m=100, read=0, out=5):
    return {"input_tokens": inp, "cache_creation_input_tokens": w1h + w5m, "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": w5m, "ephemeral_1h_input_tokens": w1h},
            "output_tokens": out}


def asst(ts, rid, block, out=5, w1h=0, w5m=100, read=0, model="claude-opus-4-6", inp=3, **kw):
    return rec("assistant", ts, requestId=rid, message={"id": "m" + rid, "model": model, "role": "assistant",
                                                         "content": [block],
                                                         "usage": usage(inp, w1h, w5m, read, out)}, **kw)


def user(ts, content, **kw):
    return rec("user", ts, message={"role": "user", "content": content}, **kw)


def result(ts, tid, text, is_error=False, **kw):
    return user(ts, [{"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": is_error}], **kw)


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def write(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
