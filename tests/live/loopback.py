"""A loopback HTTP server (127.0.0.1, a free port) that speaks the subset of the Messages API that
ctxsim's live backend uses, so the real SDK and its HTTP, retry and error paths run in the test
suite with no network.

Served: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``. Like the real API it

* answers with a ``message`` object whose ``usage`` has ``input_tokens``,
  ``cache_creation_input_tokens``, ``cache_read_input_tokens``, ``cache_creation`` (5 m / 1 h split)
  and ``output_tokens``; tokens are counted as ceil(characters / 4) of the text sent, and a prefix
  ending at the last ``cache_control`` marker is written once, then read;
* refuses, with the API's status codes and error bodies: a prompt over ``window`` tokens (400
  "prompt is too long: N tokens > W maximum"), more than 4 ``cache_control`` markers, empty text
  blocks, text before tool results in a user turn, a ``tool_use`` not answered by the next user
  turn, a ``tool_result`` that answers nothing;
* sends ``request-id`` and ``x-should-retry`` headers, and ``retry-after`` / ``retry-after-ms`` on
  scripted errors.

Tests script answers per endpoint (``server.script("messages", Reply.error(429, ...),
Reply.text("..."))``); when the script is empty, ``server.responder(body) -> str`` writes the text.
Every request received is kept (``server.received``) so a test can check exactly what was sent.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import threading
import typing
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               500: "api_error", 529: "overloaded_error"}
CHARS_PER_TOKEN = 4  # the loopback's own tokenizer: ceil(chars / 4)


@dataclass
class Reply:
    status: int
    body: dict[str, Any] | None = None     # None: a message built from `text`
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    output_tokens: int | None = None

    @staticmethod
    def message(text: str, output_tokens: int | None = None) -> Reply:
        return Reply(200, None, text, output_tokens=output_tokens)

    @staticmethod
    def error(status: int, message: str, retry_after_s: float | None = None) -> Reply:
        body = {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}
        headers = {"x-should-retry": "true" if status in (408, 409, 429) or status >= 500 else "false"}
        if retry_after_s is not None:
            headers["retry-after-ms"] = str(int(retry_after_s * 1000))
            headers["retry-after"] = str(max(0, math.ceil(retry_after_s)))
        return Reply(status, body, headers=headers)


def tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def _block_chars(b: dict[str, Any]) -> int:
    if b.get("type") == "text":
        return len(b.get("text", ""))
    if b.get("type") == "tool_use":
        return len(b.get("name", "")) + len(json.dumps(b.get("input", {}), sort_keys=True))
    if b.get("type") == "tool_result":
        c = b.get("content", "")
        return len(c) if isinstance(c, str) else sum(_block_chars(x) for x in c)
    if b.get("type") == "thinking":
        return len(b.get("thinking", ""))
    return len(json.dumps(b, sort_keys=True))


def _units(body: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
    """Every cacheable unit in API order (tools, system blocks, message blocks) with its chars."""
    out = []
    for t in body.get("tools", []) or []:
        out.append((t, len(json.dumps({k: v for k, v in t.items() if k != "cache_control"}, sort_keys=True))))
    system = body.get("system")
    if isinstance(system, str):
        out.append(({"type": "text", "text": system}, len(system)))
    else:
        for b in system or []:
            out.append((b, _block_chars(b)))
    for turn in body.get("messages", []):
        content = turn.get("content")
        if isinstance(content, str):
            out.append(({"type": "text", "text": content}, len(content)))
        else:
            for b in content:
                out.append((b, _block_chars(b)))
    return out


def validate(body: dict[str, Any], window: int | None) -> tuple[int, str] | None:
    """The 400s the real API answers for what ctxsim could send wrong; None if acceptable."""
    units = _units(body)
    marks = sum(1 for u, _ in units if "cache_control" in u)
    if marks > 4:
        return 400, f"A maximum of 4 blocks with cache_control may be provided. Found {marks}."
    msgs = body.get("messages", [])
    if not msgs:
        return 400, "messages: at least one message is required"
    for i, turn in enumerate(msgs):
        content = turn["content"] if isinstance(turn["content"], list) else [{"type": "text", "text": turn["content"]}]
        for b in content:
            if b.get("type") == "text" and not b.get("text", "").strip():
                return 400, f"messages.{i}: text content blocks must contain non-whitespace text"
        if turn["role"] == "user":
            seen_other = False
            for b in content:
                if b.get("type") != "tool_result":
                    seen_other = True
                elif seen_other:
                    return 400, f"messages.{i}: tool_result blocks must come first in the user message content"
            prev = msgs[i - 1] if i else None
            uses = {b["id"] for b in (prev["content"] if prev and isinstance(prev["content"], list) else [])
                    if prev["role"] == "assistant" and b.get("type") == "tool_use"}
            for b in content:
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in uses:
                    return 400, (f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                                 f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                                 "`tool_use` block in the previous message.")
        else:
            ids = [b["id"] for b in content if b.get("type") == "tool_use"]
            nxt = msgs[i + 1] if i + 1 < len(msgs) else None
            answered = {b.get("tool_use_id") for b in (nxt["content"] if nxt and isinstance(nxt["content"], list) else [])
                        if b.get("type") == "tool_result"}
            missing = [x for x in ids if x not in answered]
            if missing and nxt is not None:
                return 400, (f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
                             f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                             "`tool_result` block in the next message.")
    total = tokens(sum(c for _, c in units))
    if window is not None and total + int(body.get("max_tokens", 0)) > window:
        return 400, f"prompt is too long: {total} tokens > {window - int(body.get('max_tokens', 0))} maximum"
    return None


class _Server(ThreadingHTTPServer):
    """A client that went away (what the outage tests do on purpose: a hang, a dropped connection)
    is not an error to print: its handler thread, still running after the test, printed it into
    whatever stderr the next test had captured."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class Loopback:
    """The server. ``url`` is its base URL (give it to the SDK as ``base_url``)."""

    def __init__(self, window: int | None = None) -> None:
        self.window = window
        self.received: list[dict[str, Any]] = []
        self.answers: list[tuple[str, int, dict[str, Any]]] = []  # (endpoint, status, body) as sent back
        self.queues: dict[str, deque[Reply]] = {"messages": deque(), "count_tokens": deque()}
        self.responder: Callable[[dict[str, Any]], str] = default_responder
        self._cache: dict[str, str] = {}  # prefix digest -> ttl
        self._n = 0
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def script(self, endpoint: str, *replies: Reply) -> None:
        self.queues[endpoint].extend(replies)

    def bodies(self, endpoint: str = "messages") -> list[dict[str, Any]]:
        return [r["body"] for r in self.received if r["endpoint"] == endpoint]

    # --- the API --------------------------------------------------------------------------------
    def answer(self, endpoint: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._lock:
            self._n += 1
            rid = f"req_loopback_{self._n:04d}"
            scripted = self.queues[endpoint].popleft() if self.queues[endpoint] else None
        headers = {"request-id": rid}
        if scripted is not None and scripted.status != 200:
            return scripted.status, scripted.body or {}, {**headers, **scripted.headers}
        bad = validate(body, self.window)
        if bad is not None:
            status, msg = bad
            r = Reply.error(status, msg)
            return status, r.body or {}, {**headers, **r.headers}
        units = _units(body)
        total = tokens(sum(c for _, c in units))
        if endpoint == "count_tokens":
            return 200, {"input_tokens": total}, headers
        text = scripted.text if scripted is not None and scripted.text is not None else self.responder(body)
        out_tokens = scripted.output_tokens if scripted is not None and scripted.output_tokens else tokens(len(text))
        usage = self._usage(units, total)
        usage["output_tokens"] = out_tokens
        msg = {"id": f"msg_loopback_{self._n:04d}", "type": "message", "role": "assistant",
               "model": body.get("model"), "content": [{"type": "text", "text": text}],
               "stop_reason": "end_turn", "stop_sequence": None, "usage": usage}
        return 200, msg, headers

    def _usage(self, units: list[tuple[dict[str, Any], int]], total: int) -> dict[str, Any]:
        last = max((i for i, (u, _) in enumerate(units) if "cache_control" in u), default=None)
        read = write5 = write1 = 0
        if last is not None:
            h = hashlib.sha256()
            for u, _ in units[: last + 1]:
                h.update(json.dumps({k: v for k, v in u.items() if k != "cache_control"}, sort_keys=True).encode())
            digest = h.hexdigest()
            prefix = tokens(sum(c for _, c in units[: last + 1]))
            ttl = units[last][0]["cache_control"].get("ttl", "5m")
            with self._lock:
                hit = digest in self._cache
                self._cache.setdefault(digest, ttl)
            if hit:
                read = prefix
            elif ttl == "1h":
                write1 = prefix
            else:
                write5 = prefix
        return {"input_tokens": total - read - write5 - write1, "cache_creation_input_tokens": write5 + write1,
                "cache_read_input_tokens": read,
                "cache_creation": {"ephemeral_5m_input_tokens": write5, "ephemeral_1h_input_tokens": write1}}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n)
                path = self.path.split("?", 1)[0]
                endpoint = {"/v1/messages": "messages", "/v1/messages/count_tokens": "count_tokens"}.get(path)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = None
                server.received.append({"path": path, "endpoint": endpoint, "body": body,
                                        "headers": {k.lower(): v for k, v in self.headers.items()}})
                if endpoint is None:
                    status, payload, headers = 404, Reply.error(404, f"no route {path}").body or {}, {}
                elif body is None:
                    status, payload, headers = 400, Reply.error(400, "body is not JSON").body or {}, {}
                else:
                    status, payload, headers = server.answer(endpoint, body)
                server.answers.append((endpoint or path, status, payload))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def default_responder(body: dict[str, Any]) -> str:
    """A deterministic 'summary': how many turns it saw and the start of the last instruction."""
    msgs = body.get("messages", [])
    last = msgs[-1]["content"] if msgs else []
    texts = [b.get("text", "") for b in last if isinstance(b, dict) and b.get("type") == "text"] if isinstance(last, list) else [last]
    return f"Summary of {len(msgs)} turns. Instruction began: {texts[-1][:60] if texts else ''}"


def request_text(body: dict[str, Any]) -> str:
    """All text of a request's turns except the final instruction (what a summariser reads)."""
    parts = []
    msgs = body.get("messages", [])
    for i, turn in enumerate(msgs):
        content = turn["content"] if isinstance(turn["content"], list) else [{"type": "text", "text": turn["content"]}]
        if i == len(msgs) - 1 and content and content[-1].get("type") == "text":
            content = content[:-1]
        for b in content:
            if b.get("type") == "text":
                parts.append(b["text"])
            elif b.get("type") == "tool_result" and isinstance(b.get("content"), str):
                parts.append(b["content"])
    return "\n".join(parts)


def keeping_responder(prefixes: tuple[str, ...] = ("Goal:", "Constraint:", "Decision:"),
                      path_pattern: str | None = None) -> Callable[[dict[str, Any]], str]:
    """A deterministic summariser: keeps every line that starts with one of ``prefixes`` (once,
    in order) and every path matching ``path_pattern``; drops everything else. Which facts survive
    is thus known by construction (tests of calibration and replay)."""
    import re

    line_re = re.compile(r"(?:^|(?<=\n))[ \t>*-]*((?:" + "|".join(re.escape(p) for p in prefixes) + r")[^\n]*)")
    path_re = re.compile(path_pattern) if path_pattern else None

    def respond(body: dict[str, Any]) -> str:
        text = request_text(body)
        kept = list(dict.fromkeys(m.group(1).strip() for m in line_re.finditer(text)))
        paths = list(dict.fromkeys(path_re.findall(text))) if path_re else []
        out = ["## Summary", *kept]
        if paths:
            out.append("Earlier context: " + ", ".join(paths))
        return "\n".join(out)

    return respond


# --- the SDK's own typed parameters -------------------------------------------------------------

@functools.cache
def _adapter(cls):
    from pydantic import TypeAdapter

    return set(typing.get_type_hints(cls)), TypeAdapter(cls)


def assert_sdk_typed(params: dict) -> None:
    """Every dict is one of the SDK's own TypedDicts: no key it does not declare, every value of the
    declared type (pydantic validates a TypedDict's Iterable fields lazily, so each block is checked
    on its own)."""
    from anthropic.types import TextBlockParam, ToolParam, ToolResultBlockParam, ToolUseBlockParam
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    block_types = {"text": TextBlockParam, "tool_use": ToolUseBlockParam, "tool_result": ToolResultBlockParam}
    top = set(typing.get_type_hints(MessageCreateParamsNonStreaming))
    assert set(params) <= top, set(params) - top

    def check(obj: dict, cls) -> None:
        declared, adapter = _adapter(cls)
        assert set(obj) <= declared, (cls.__name__, set(obj) - declared)
        adapter.validate_python(obj)

    for b in params.get("system", []):
        check(b, TextBlockParam)
    for t in params.get("tools", []):
        check(t, ToolParam)
    for turn in params["messages"]:
        assert set(turn) == {"role", "content"} and turn["role"] in ("user", "assistant")
        for b in turn["content"]:
            check(b, block_types[b["type"]])
