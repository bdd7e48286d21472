"""JSON as ctxsim reads it from users' files: strict (no NaN / Infinity, no number of thousands of
digits, no nesting deeper than a real log has), and every refusal located (the line of a JSONL
record; the line and column of a JSON document's node).

``json.loads`` alone accepts ``NaN``, raises ``RecursionError`` on deep nesting and a bare
``ValueError`` on a 5,000-digit number: each of those reached users as a traceback or as a
number no agent can have logged. Here each is a :class:`BadJSON` with the character offset, so
the caller turns it into ``path:line[:column]: what``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

MAX_DEPTH = 100   # where a refusal of deep nesting points (the real logs here nest < 20 levels: assumed bound)


class BadJSON(ValueError):
    """Text that is not the JSON a log holds; ``pos`` is the character offset of the problem."""

    def __init__(self, what: str, pos: int) -> None:
        self.what, self.pos = what, pos
        super().__init__(what)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):   # 1e400: valid JSON syntax, a float Python reads as infinity
        raise ValueError(f"{text[:20]} is out of range (infinite as a number)")
    return v


def _brackets(text: str, start: int = 0):
    """(offset, depth after it) of each bracket outside strings, from ``start`` (at depth 0)."""
    depth = 0
    in_str = esc = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            yield i, depth
        elif ch in "]}":
            depth -= 1
            yield i, depth


def _depth_at(text: str) -> int | None:
    """Offset where nesting first exceeds MAX_DEPTH, or None."""
    return next((i for i, d in _brackets(text) if d > MAX_DEPTH), None)


def loads(text: str) -> Any:
    """Parse ``text`` strictly; raises :class:`BadJSON` (with its offset) for anything else."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as e:
        # "Unterminated string starting at", "Invalid control character at": the caller says where
        # (" at column 9"; before: "starting at at column 9")
        raise BadJSON(f"not JSON: {e.msg.removesuffix(' at')}", e.pos) from None
    except RecursionError:
        raise BadJSON("nested too deeply to be a log record (hundreds of levels)", _depth_at(text) or 0) from None
    except ValueError as e:   # NaN / Infinity, or a number with more digits than Python converts
        msg = str(e)
        if "digits" in msg:
            msg = "a number with thousands of digits"
        return _locate_bad_value(text, msg)


class InputRepaired(UserWarning):
    """A repair made while reading a user's file (a lone surrogate replaced): the message names the
    file and the line; the command line prints it as ``ctxsim CMD: warning: ...``."""


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")   # \uD800-\uDFFF written as a JSON escape
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# where a lone one is written: a high half not followed by a low one, or a low half not after a high one
LONE_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
                         r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
REPLACEMENT = "\ufffd"


def lone_surrogates(text: str, obj: Any) -> tuple[Any, str | None]:
    """``obj`` (parsed from ``text``) with every lone UTF-16 surrogate replaced by U+FFFD, and the
    first one replaced (None: there was none, ``obj`` itself is returned). Valid JSON can hold one
    (``"\\ud83d"``: a log that cut a string in the middle of an emoji); Python keeps it in the string,
    and it cannot be written as UTF-8, hashed or tokenised. A pair is decoded to one character by
    the parser, so what is left is lone. Only text with such an escape is walked."""
    if "\\u" not in text or not _SURROGATE_ESCAPE.search(text):
        return obj, None
    first: list[str] = []

    def fix(s: str) -> str:
        m = _LONE_SURROGATE.search(s)
        if m is None:
            return s
        if not first:
            first.append(m.group())
        return _LONE_SURROGATE.sub(REPLACEMENT, s)

    def walk(o: Any) -> Any:
        if isinstance(o, str):
            return fix(o)
        if isinstance(o, dict):
            return {fix(k) if isinstance(k, str) else k: walk(v) for k, v in o.items()}
        if isinstance(o, list):
            return [walk(v) for v in o]
        return o

    out = walk(obj)
    return (out, first[0]) if first else (obj, None)


def surrogate_note(found: str) -> str:
    """What a repair of :func:`lone_surrogates` is called in a warning."""
    return (f"a lone UTF-16 surrogate (\\u{ord(found):04x}: a string cut in the middle of a character) "
            "replaced by U+FFFD")


def _locate_bad_value(text: str, msg: str) -> Any:
    import re

    pattern = (r"(?<![\w\"])(NaN|-?Infinity)(?![\w\"])" if "JSON number" in msg else
               r"-?\d+(?:\.\d+)?[eE][+-]?\d{3,}" if "out of range" in msg else r"\d{4000,}")
    m = re.search(pattern, text)
    raise BadJSON(msg, m.start() if m else 0)


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of character offset ``pos``."""
    pos = max(0, min(pos, len(text)))
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def byte_line_col(data: bytes, pos: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of byte offset ``pos``."""
    pos = max(0, min(pos, len(data)))
    return data.count(b"\n", 0, pos) + 1, pos - (data.rfind(b"\n", 0, pos) + 1) + 1


_WS = " \t\r\n"


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def offset_of(text: str, node: Sequence[Any]) -> int | None:
    """Character offset of the value at ``node`` (keys and list indices) in the JSON document
    ``text`` (already known to parse), or None when the path is not there."""
    dec = json.JSONDecoder()
    i = _skip(text, 0)
    for key in node:
        if i >= len(text):
            return None
        if text[i] == "{" and isinstance(key, str):
            i = _skip(text, i + 1)
            while i < len(text) and text[i] != "}":
                k, i = dec.raw_decode(text, i)
                i = _skip(text, _skip(text, i) + 1)   # past ':'
                if k == key:
                    break
                i = _skip(text, _end(text, i, dec))
                if text[i] == ",":
                    i = _skip(text, i + 1)
            else:
                return None
        elif text[i] == "[" and isinstance(key, int):
            i = _skip(text, i + 1)
            for _ in range(key):
                if i >= len(text) or text[i] == "]":
                    return None
                i = _skip(text, _end(text, i, dec))
                if text[i] == ",":
                    i = _skip(text, i + 1)
            if i >= len(text) or text[i] == "]":
                return None
        else:
            return None
    return i


def _end(text: str, i: int, dec: json.JSONDecoder) -> int:
    """Offset just past the value starting at ``i``."""
    if text[i] in "[{":
        return next((j + 1 for j, d in _brackets(text, i) if d == 0), len(text))
    return dec.raw_decode(text, i)[1]


def node_line_col(text: str, node: Sequence[Any]) -> tuple[int, int]:
    """Line and column of ``node`` in the document, falling back to its nearest existing parent."""
    node = list(node)
    while True:
        at = offset_of(text, node)
        if at is not None or not node:
            return line_col(text, at or 0)
        node.pop()


class NotFinite(ValueError):
    """A number that is not finite in what ctxsim was about to write as JSON; ``where`` is its key
    path (``cost_usd``, ``rows[3].latency_s.p95``)."""

    def __init__(self, where: str, value: float) -> None:
        self.where, self.value = where, value
        super().__init__(f"{where or 'the value'} is {value}, not a finite number")


def non_finite(obj: Any, where: str = "") -> tuple[str, float] | None:
    """(key path, value) of the first NaN or infinite float in ``obj`` (dicts, lists, tuples), or None."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (where, obj)
    if isinstance(obj, dict):
        for k, v in obj.items():
            hit = non_finite(v, f"{where}.{k}" if where else str(k))
            if hit:
                return hit
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            hit = non_finite(v, f"{where}[{i}]")
            if hit:
                return hit
    return None


def dumps(obj: Any, **kw: Any) -> str:
    """``json.dumps`` that never writes ``NaN`` or ``Infinity`` (not JSON: a reader in another
    language fails on it, or reads a number no run can have): :class:`NotFinite` names the value."""
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError:
        hit = non_finite(obj)
        if hit is None:
            raise
        raise NotFinite(*hit) from None
