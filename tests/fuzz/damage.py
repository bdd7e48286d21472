"""Damaged copies of real logs and traces, the kinds a careful user meets: truncated or flipped
bytes, bad UTF-8, a byte-order mark, lost or repeated lines, a value of the wrong type, NaN and
Infinity, absurd or negative counts, deep nesting, bad timestamps, empty ids, missing keys.

Every mutant is a pure function of (the source bytes, its format, the seed): the same seed gives
the same mutant on any machine. A mutant records what was damaged (``line``: the 1-based line of a
JSONL file; ``pos``: the character offset in a JSON document) and whether the damage *must* be
refused (``must_reject``: invalid JSON, or a value that cannot be real where the importer reads a
count or a time), so :mod:`tests.fuzz.judge` can tell a silent acceptance from a harmless edit.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

RAW = "\x00RAW:"  # a placeholder string replaced by raw JSON text after dumping (NaN, 5000 digits ...)

# value mutations that make a value impossible where it is a count or a time
IMPOSSIBLE = ("negative", "fraction", "huge", "nonfinite", "numeric_string", "wrong_type")
BYTE_KINDS = ("truncate", "flip", "bad_utf8", "nul", "bom", "crlf", "blank_line", "delete_line", "dup_line",
              "swap_lines")
VALUE_KINDS = ("wrong_type", "numeric_string", "nonfinite", "huge", "negative", "fraction", "deep", "empty_id",
               "bad_timestamp", "remove_key", "digits")
KINDS = BYTE_KINDS + VALUE_KINDS

# keys whose numeric value an importer or the trace loader reads as a count of tokens, a time or a cost
COUNT_KEY = re.compile(r"(tokens?|Tokens|timestamp|^t$|execution_time|context_window|api_calls|cost|window|"
                       r"scale|fit_calls|pre_tokens|preTokens)", re.IGNORECASE)
ID_KEY = re.compile(r"(^id$|_id$|Id$|ID$|^call_id$|^requestId$|^uuid$)")
TIME_KEY = re.compile(r"^(timestamp|t|start)$")


@dataclass(frozen=True)
class Mutant:
    kind: str
    data: bytes
    line: int | None = None         # JSONL: the damaged line (1-based)
    pos: int | None = None          # JSON document: character offset of the damaged node
    node: tuple = ()                # path of the damaged value inside its line / document
    must_reject: bool = False       # invalid JSON, or an impossible value where a count or time is read
    count_field: bool = False       # the damaged value sits at a count/time key
    detail: str = ""

    def describe(self) -> str:
        where = f"line {self.line}" if self.line else f"offset {self.pos}" if self.pos is not None else "file"
        return f"{self.kind} at {where} {'/'.join(map(str, self.node))} {self.detail}".strip()


# --- walking JSON values ------------------------------------------------------------------------

def nodes(v: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    yield path, v
    if isinstance(v, dict):
        for k, x in v.items():
            yield from nodes(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from nodes(x, path + (i,))


def _set(root: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = root
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return root


def _remove(root: Any, path: tuple) -> Any:
    parent = root
    for k in path[:-1]:
        parent = parent[k]
    del parent[path[-1]]
    return root


def _dump(v: Any, indent: int | None) -> str:
    text = json.dumps(v, ensure_ascii=False, indent=indent, allow_nan=True)
    return re.sub(r'"\\u0000RAW:((?:[^"\\]|\\.)*)"', lambda m: json.loads(f'"{m.group(1)}"'), text)


def _is_count(path: tuple) -> bool:
    return bool(path) and isinstance(path[-1], str) and bool(COUNT_KEY.search(path[-1]))


def _wrong_type(v: Any, rng: random.Random) -> Any:
    choices = [[], {}, "x", 7, True, [1, 2], {"a": 1}]
    number = isinstance(v, (int, float)) and not isinstance(v, bool)   # 7 for 2.5 is a number still
    return rng.choice([c for c in choices if type(c) is not type(v) and not (number and type(c) is int)])


def mutate_value(kind: str, root: Any, rng: random.Random) -> tuple[Any, tuple, bool, str] | None:
    """Apply one value mutation to a deep copy of ``root``: (new root, path, must_reject, detail),
    or None when the value has no node this kind applies to."""
    root = json.loads(json.dumps(root))
    all_nodes = list(nodes(root))
    numeric = [(p, v) for p, v in all_nodes if isinstance(v, (int, float)) and not isinstance(v, bool) and p]
    counts = [(p, v) for p, v in numeric if _is_count(p)]
    prefer = lambda xs: (counts if counts and rng.random() < 0.75 else xs)  # noqa: E731 - counts first
    if kind in ("negative", "fraction", "huge", "nonfinite", "numeric_string"):
        pool = prefer(numeric)
        if not pool:
            return None
        path, v = rng.choice(pool)
        if kind == "negative":
            new = rng.choice([-1, -1000, -0.5])
        elif kind == "fraction":
            new = v + 0.5 if isinstance(v, int) else v
            if new == v:
                return None
        elif kind == "huge":
            new = rng.choice([1e308, 10 ** 30, 2 ** 63, 1e18])
        elif kind == "nonfinite":
            new = RAW + rng.choice(["NaN", "Infinity", "-Infinity", "1e400"])
        else:
            new = str(v)
        count = _is_count(path)
        # NaN / Infinity are not JSON at all; the others are impossible only as counts and times
        must = kind == "nonfinite" or count
        return _set(root, path, new), path, must, f"{path[-1]}={_short(new)}"
    if kind == "digits":
        pool = prefer(numeric)
        if not pool:
            return None
        path, _ = rng.choice(pool)
        return _set(root, path, RAW + "9" * 5000), path, True, "5000-digit number"
    if kind == "wrong_type":
        pool = prefer([(p, v) for p, v in all_nodes if p])
        if not pool:
            return None
        path, v = rng.choice(pool)
        new = _wrong_type(v, rng)
        count = _is_count(path) and isinstance(v, (int, float)) and not isinstance(v, bool)
        return _set(root, path, new), path, count, f"{path[-1]}: {type(v).__name__} -> {_short(new)}"
    if kind == "deep":
        pool = [(p, v) for p, v in all_nodes if p]
        if not pool:
            return None
        path, _ = rng.choice(pool)
        depth = rng.choice([400, 50_000])
        return _set(root, path, RAW + "[" * depth + "]" * depth), path, depth > 10_000, f"nested {depth} deep"
    if kind == "empty_id":
        pool = [(p, v) for p, v in all_nodes if p and isinstance(p[-1], str) and ID_KEY.search(p[-1])
                and isinstance(v, str) and v]
        if not pool:
            return None
        path, _ = rng.choice(pool)
        return _set(root, path, ""), path, False, f"{path[-1]}=''"
    if kind == "bad_timestamp":
        pool = [(p, v) for p, v in all_nodes if p and isinstance(p[-1], str) and TIME_KEY.match(p[-1])
                and not isinstance(v, (dict, list, bool))]
        if not pool:
            return None
        path, v = rng.choice(pool)
        new = rng.choice(["yesterday", "2026-13-45T99:00:00Z", "", -5, 1e20, RAW + "NaN", "12.5"])
        return _set(root, path, new), path, True, f"{path[-1]}={_short(new)}"
    if kind == "remove_key":
        pool = [(p, v) for p, v in all_nodes if p and isinstance(p[-1], str)]
        if not pool:
            return None
        path, _ = rng.choice(pool)
        return _remove(root, path), path, False, f"without {path[-1]}"
    raise ValueError(kind)


def _short(v: Any) -> str:
    s = v[len(RAW):] if isinstance(v, str) and v.startswith(RAW) else json.dumps(v)
    return s if len(s) <= 20 else s[:17] + "..."


# --- byte damage --------------------------------------------------------------------------------

def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def mutate_bytes(kind: str, data: bytes, rng: random.Random, jsonl: bool) -> Mutant | None:
    lines = data.split(b"\n")
    starts = [0]
    for ln in lines[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    content = [i for i, ln in enumerate(lines) if ln.strip()]
    if not content or not data:
        return None
    off = rng.randrange(len(data))
    if kind == "truncate":
        cut = rng.randrange(1, len(data))
        return Mutant(kind, data[:cut], _line_of(data, cut) if jsonl else None, None if jsonl else cut,
                      detail=f"cut at byte {cut} of {len(data)}")
    if kind == "flip":
        bit = 1 << rng.randrange(8)
        new = data[:off] + bytes([data[off] ^ bit]) + data[off + 1:]
        return Mutant(kind, new, _line_of(data, off), off, detail=f"byte {off} ^ {bit:#x}")
    if kind in ("bad_utf8", "nul"):
        # inside a line's text, never at a line break
        i = rng.choice(content)
        at = starts[i] + rng.randrange(max(1, len(lines[i])))
        junk = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80"]) if kind == "bad_utf8" else b"\x00"
        return Mutant(kind, data[:at] + junk + data[at:], i + 1, at, must_reject=True, detail=f"{junk!r} at byte {at}")
    if kind == "bom":
        return Mutant(kind, b"\xef\xbb\xbf" + data, 1, 0)
    if kind == "crlf":
        return Mutant(kind, data.replace(b"\n", b"\r\n"), None, None)
    if not jsonl:
        return None
    i = rng.choice(content)
    if kind == "blank_line":
        return Mutant(kind, b"\n".join(lines[:i] + [b""] + lines[i:]), i + 1)
    if kind == "delete_line":
        return Mutant(kind, b"\n".join(lines[:i] + lines[i + 1:]), i + 1)
    if kind == "dup_line":
        return Mutant(kind, b"\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]), i + 2)
    if kind == "swap_lines":
        j = content[(content.index(i) + 1) % len(content)]
        if i == j:
            return None
        a, b = sorted((i, j))
        new = list(lines)
        new[a], new[b] = new[b], new[a]
        return Mutant(kind, b"\n".join(new), a + 1, detail=f"lines {a + 1} and {b + 1}")
    raise ValueError(kind)


# --- one mutant of a file -----------------------------------------------------------------------

def mutant(data: bytes, jsonl: bool, kind: str, seed: int) -> Mutant | None:
    """One mutant of ``data`` (a JSONL file if ``jsonl``, else one JSON document)."""
    rng = random.Random(f"{kind}:{seed}")
    if kind in BYTE_KINDS:
        return mutate_bytes(kind, data, rng, jsonl)
    text = data.decode("utf-8")
    if jsonl:
        lines = text.split("\n")
        content = [i for i, ln in enumerate(lines) if ln.strip()]
        for _ in range(8):   # a line this kind applies to
            i = rng.choice(content)
            got = mutate_value(kind, json.loads(lines[i]), rng)
            if got is None:
                continue
            new, path, must, detail = got
            lines[i] = _dump(new, None)
            return Mutant(kind, "\n".join(lines).encode("utf-8"), i + 1, None, path, must, _is_count(path), detail)
        return None
    got = mutate_value(kind, json.loads(text), rng)
    if got is None:
        return None
    new, path, must, detail = got
    out = _dump(new, 2)
    return Mutant(kind, out.encode("utf-8"), None, None, path, must, _is_count(path), detail)


def mutants(data: bytes, jsonl: bool, n: int, seed: int, kinds: tuple[str, ...] = KINDS) -> list[Mutant]:
    """``n`` mutants of ``data``, the kinds taken in turn (seeded: the same list on every machine)."""
    out: list[Mutant] = []
    k = 0
    while len(out) < n and k < n * 4:
        m = mutant(data, jsonl, kinds[k % len(kinds)], seed * 100_003 + k)
        k += 1
        if m is not None:
            out.append(m)
    return out
