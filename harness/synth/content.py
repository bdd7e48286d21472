"""Content makers: realistic tool output and dialogue text of a requested size.

True token counts come from a real BPE tokenizer, so what the generator writes must tokenise like
what agents really see: code listings with line numbers, grep hits, test logs with stack traces,
JSON, directory listings, git output, prose. Each maker appends whole lines until the requested
number of characters is reached (the last line is cut to fit), so sizes follow the fitted
distributions exactly while the text keeps its shape.

Randomness comes from :class:`Draw`, a buffered view of a seeded ``numpy.random.Generator``
(drawing integers one by one from numpy costs microseconds each; the buffer keeps a 1M-token
session in a few seconds) — still a pure function of the seed.
"""

from __future__ import annotations

import json

import numpy as np

WORDS = (
    "the a of to and in is for that with on as by this be are from at it an or not we which when "
    "each all if will can must should but only into than then so more one new other any these its "
    "request response cache client server module function value error result state config file "
    "path token window buffer queue worker retry timeout handler session user data table index "
    "update check return call build test parse read write load save merge split compute resolve "
    "record event message stream batch chunk offset limit size count score metric report output "
    "input schema field type option default fallback behaviour change issue fix patch review "
    "because however instead already still again later before after while during until between"
).split()
NOUNS = ("cache client server queue worker retry timeout handler session user table index record event "
         "message stream batch chunk offset limit metric report schema field option plan store ledger "
         "upload download invoice account order payment tenant shard replica lease lock job task "
         "pipeline parser lexer router bucket blob manifest snapshot checkpoint").split()
VERBS = ("get set load save build parse read write merge split compute resolve update check fetch "
         "flush commit apply render encode decode validate normalize register dispatch schedule "
         "retry refresh expire evict compact spill restore").split()
TYPES = ("int str float bool bytes None dict[str, Any] list[str] Path Optional[int] Sequence[float] "
         "Iterator[Record]").split(" ")
DIRS = ("src lib core api services storage billing auth utils models handlers workers cli tests "
        "internal pkg app server client config migrations scripts docs").split()
EXTS = (".py", ".py", ".py", ".ts", ".go", ".rs", ".json", ".toml", ".md", ".yaml")
EXC = ("ValueError", "KeyError", "TypeError", "AssertionError", "RuntimeError", "TimeoutError",
       "ConnectionResetError", "IndexError", "AttributeError", "FileNotFoundError")
PYKW = ("return", "if", "for", "while", "raise", "yield", "with", "assert")


class Draw:
    """Buffered uniform integers from a seeded generator (deterministic, fast)."""

    __slots__ = ("rng", "_buf", "_i")

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._buf = rng.integers(0, 2**31, 65536).tolist()
        self._i = 0

    def int(self, n: int) -> int:
        """Uniform in [0, n)."""
        if self._i >= len(self._buf):
            self._buf = self.rng.integers(0, 2**31, 65536).tolist()
            self._i = 0
        v = self._buf[self._i]
        self._i += 1
        return v % n if n > 0 else 0

    def pick(self, seq):
        return seq[self.int(len(seq))]

    def chance(self, p: float) -> bool:
        return self.int(1_000_000) < p * 1_000_000

    # --- building blocks -------------------------------------------------------------------------
    def ident(self) -> str:
        return f"{self.pick(VERBS)}_{self.pick(NOUNS)}"

    def cls(self) -> str:
        a, b = self.pick(NOUNS), self.pick(NOUNS)
        return a.capitalize() + b.capitalize()

    def path(self, ext: str | None = None) -> str:
        depth = 1 + self.int(3)
        parts = [self.pick(DIRS) for _ in range(depth)]
        return "/".join(parts) + "/" + self.pick(NOUNS) + "_" + self.pick(NOUNS) + (ext or self.pick(EXTS))

    def sentence(self, lo: int = 6, hi: int = 18) -> str:
        n = lo + self.int(hi - lo + 1)
        words = [self.pick(WORDS) for _ in range(n)]
        if self.chance(0.3):
            words[self.int(n)] = f"`{self.ident()}()`"
        return " ".join(words).capitalize() + "."

    def hexs(self, n: int = 8) -> str:
        return "".join("0123456789abcdef"[self.int(16)] for _ in range(n))


def _fill(lines_fn, n_chars: int, head: str = "") -> str:
    """Append whole lines from ``lines_fn()`` until ``n_chars`` is reached, then cut to size."""
    out = [head] if head else []
    total = len(head)
    while total < n_chars:
        line = lines_fn()
        out.append(line)
        total += len(line) + 1
    text = "\n".join(out)
    return text[:n_chars] if n_chars > 0 else ""


# --- makers ------------------------------------------------------------------------------------------
def code_line(d: Draw, indent: int) -> str:
    pad = "    " * indent
    r = d.int(12)
    if r == 0:
        return f"{pad}def {d.ident()}(self, {d.pick(NOUNS)}: {d.pick(TYPES)}, {d.pick(NOUNS)}: {d.pick(TYPES)} = None) -> {d.pick(TYPES)}:"
    if r == 1:
        return f'{pad}"""{d.sentence(5, 12)}"""'
    if r == 2:
        return f"{pad}# {d.sentence(4, 10)}"
    if r == 3:
        return f"{pad}if {d.pick(NOUNS)} is None or len({d.pick(NOUNS)}) > {d.int(4096)}:"
    if r == 4:
        return f"{pad}for {d.pick(NOUNS)} in self.{d.pick(NOUNS)}s:"
    if r == 5:
        return f"{pad}raise {d.pick(EXC)}(f\"{d.sentence(3, 7)[:-1]}: {{{d.pick(NOUNS)}!r}}\")"
    if r == 6:
        return f"{pad}return self.{d.ident()}({d.pick(NOUNS)}, {d.pick(NOUNS)}={d.int(100)})"
    if r == 7:
        return f"{pad}self.{d.pick(NOUNS)}_{d.pick(NOUNS)} = {d.pick(NOUNS)}.{d.ident()}()"
    if r == 8:
        return f"{pad}{d.pick(NOUNS)} = [{d.pick(NOUNS)}.{d.pick(NOUNS)} for {d.pick(NOUNS)} in {d.pick(NOUNS)}s if {d.pick(NOUNS)}]"
    if r == 9:
        return f"{pad}with self._{d.pick(NOUNS)}_lock:"
    if r == 10:
        return ""
    return f"{pad}{d.pick(NOUNS)}_{d.pick(NOUNS)} = {d.ident()}({d.pick(NOUNS)}, timeout={d.int(120)})"


def code_listing(d: Draw, n_chars: int, path: str | None = None, numbered: bool = True) -> str:
    """A source file as a file-reading tool shows it (``cat -n`` style line numbers)."""
    state = {"no": 0, "indent": 0}
    header = ["from __future__ import annotations", "", f"import {d.pick(NOUNS)}",
              f"from {d.pick(DIRS)}.{d.pick(NOUNS)} import {d.cls()}, {d.ident()}", ""]

    def line() -> str:
        state["no"] += 1
        if header:
            body = header.pop(0)
        elif d.int(25) == 0:
            state["indent"] = 0
            body = f"class {d.cls()}({d.cls()}):"
        else:
            if d.int(6) == 0:
                state["indent"] = max(1, min(3, state["indent"] + d.int(3) - 1))
            body = code_line(d, max(state["indent"], 1 if state["no"] > 6 else 0))
        return f"{state['no']:>6}\t{body}" if numbered else body

    return _fill(line, n_chars)


def grep_hits(d: Draw, n_chars: int) -> str:
    files = [d.path(".py") for _ in range(3 + d.int(12))]

    def line() -> str:
        return f"{d.pick(files)}:{1 + d.int(900)}:{code_line(d, d.int(3))}"

    return _fill(line, n_chars)


def dir_listing(d: Draw, n_chars: int) -> str:
    root = d.pick(DIRS)

    def line() -> str:
        return f"{root}/{d.path()}"

    return _fill(line, n_chars)


def test_log(d: Draw, n_chars: int) -> str:
    """pytest output: collection, progress, failures with tracebacks, a summary line."""
    n_tests = 20 + d.int(400)
    head = (f"============================= test session starts ==============================\n"
            f"platform linux -- Python 3.12.{d.int(9)}, pytest-8.{d.int(4)}.{d.int(3)}, pluggy-1.5.0\n"
            f"rootdir: /workspace/project\ncollected {n_tests} items\n")
    state = {"k": 0}

    def line() -> str:
        state["k"] += 1
        r = d.int(10)
        if r < 4:
            return f"tests/test_{d.pick(NOUNS)}.py " + "".join(".F"[d.int(30) == 0] for _ in range(10 + d.int(60))) + f" [{d.int(100):>3}%]"
        if r < 6:
            return (f"___________________ test_{d.ident()} ___________________\n"
                    f"Traceback (most recent call last):\n"
                    f"  File \"/workspace/project/{d.path('.py')}\", line {1 + d.int(800)}, in {d.ident()}\n"
                    f"    {code_line(d, 0)}\n"
                    f"  File \"/workspace/project/{d.path('.py')}\", line {1 + d.int(800)}, in {d.ident()}\n"
                    f"    {code_line(d, 0)}\n"
                    f"E       {d.pick(EXC)}: {d.sentence(4, 9)}")
        if r < 8:
            return f"FAILED tests/test_{d.pick(NOUNS)}.py::test_{d.ident()} - {d.pick(EXC)}: {d.sentence(3, 8)}"
        return f"{d.pick(NOUNS)}.{d.pick(NOUNS)} WARNING {d.sentence(5, 12)}"

    return _fill(line, n_chars, head)


def json_blob(d: Draw, n_chars: int) -> str:
    """Pretty-printed JSON (API responses, package manifests)."""
    items = []
    total = 0
    while total < n_chars:
        item = {"id": f"{d.pick(NOUNS)}_{d.hexs(10)}", "name": d.ident(), "status": d.pick(("ok", "pending", "failed", "stale")),
                "size": d.int(100000), "updated": f"2026-0{1 + d.int(9)}-{10 + d.int(18)}T{10 + d.int(13)}:{10 + d.int(49)}:00Z",
                "tags": [d.pick(NOUNS) for _ in range(d.int(4))], "note": d.sentence(4, 10)}
        s = json.dumps(item, indent=2)
        items.append(item)
        total += len(s) + 4
    return json.dumps({"items": items, "next": None}, indent=2)[:n_chars]


def git_output(d: Draw, n_chars: int) -> str:
    def line() -> str:
        r = d.int(3)
        if r == 0:
            return f"{d.hexs(7)} {d.pick(('feat', 'fix', 'refactor', 'test', 'docs'))}: {d.sentence(4, 10)[:-1].lower()}"
        if r == 1:
            return f" {d.path()} | {1 + d.int(120)} {'+' * (1 + d.int(20))}{'-' * d.int(10)}"
        return f"@@ -{d.int(500)},{d.int(30)} +{d.int(500)},{d.int(30)} @@\n-{code_line(d, 1)}\n+{code_line(d, 1)}"

    return _fill(line, n_chars)


def build_output(d: Draw, n_chars: int) -> str:
    def line() -> str:
        r = d.int(4)
        if r == 0:
            return f"[{d.int(100):>3}%] Building {d.path('.py')}"
        if r == 1:
            return f"{d.path('.py')}:{d.int(900)}:{d.int(80)}: warning: {d.sentence(4, 9)}"
        if r == 2:
            return f"+ {d.pick(('uv pip install', 'make', 'npm run', 'cargo build'))} {d.pick(NOUNS)}"
        return f"  {d.pick(NOUNS)}=={d.int(5)}.{d.int(30)}.{d.int(10)} ({d.pick(('cached', 'downloaded', 'built'))})"

    return _fill(line, n_chars)


def prose(d: Draw, n_chars: int) -> str:
    """Paragraphs of documentation-like prose (web pages, explanations)."""
    def line() -> str:
        return " ".join(d.sentence() for _ in range(2 + d.int(5)))

    return _fill(line, n_chars)


def edit_ack(d: Draw, n_chars: int, path: str) -> str:
    head = f"The file /workspace/project/{path} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:"
    return head if n_chars <= len(head) else head + "\n" + code_listing(d, n_chars - len(head) - 1)


BASH_MAKERS = (test_log, test_log, git_output, build_output, dir_listing, json_blob)


def tool_result(d: Draw, kind: str, n_chars: int, path: str) -> str:
    """The text of one tool result of ``kind`` and (about) ``n_chars`` characters."""
    if kind == "read":
        return code_listing(d, n_chars, path)
    if kind == "grep":
        return grep_hits(d, n_chars)
    if kind == "glob":
        return dir_listing(d, n_chars)
    if kind == "edit":
        return edit_ack(d, n_chars, path)
    if kind == "web":
        return prose(d, n_chars)
    if kind == "task":
        return prose(d, n_chars)
    if kind == "bash":
        return d.pick(BASH_MAKERS)(d, n_chars)
    raise ValueError(f"unknown tool kind {kind!r} (known: read, grep, glob, edit, web, task, bash)")


def tool_input(d: Draw, kind: str, n_chars: int, path: str) -> dict:
    """The input of one tool_use of ``kind``, sized like the logs' (edits carry code)."""
    if kind == "read":
        return {"file_path": f"/workspace/project/{path}"}
    if kind == "grep":
        return {"pattern": d.ident(), "path": f"/workspace/project/{d.pick(DIRS)}", "output_mode": "content"}
    if kind == "glob":
        return {"pattern": f"{d.pick(DIRS)}/**/*{d.pick(EXTS)}"}
    if kind == "edit":
        half = max(10, (n_chars - 120) // 2)
        return {"file_path": f"/workspace/project/{path}", "old_string": code_listing(d, half, numbered=False),
                "new_string": code_listing(d, half, numbered=False)}
    if kind == "web":
        return {"url": f"https://docs.example.org/{d.pick(NOUNS)}/{d.ident()}", "prompt": d.sentence(5, 12)}
    if kind == "task":
        return {"description": d.sentence(3, 6), "prompt": prose(d, max(40, n_chars - 60))}
    cmd = d.pick((f"python -m pytest tests/test_{d.pick(NOUNS)}.py -x -q", f"git log --oneline -{5 + d.int(30)}",
                  f"git diff {d.path()}", f"ls -la {d.pick(DIRS)}", f"make {d.pick(('build', 'lint', 'check'))}",
                  f"curl -s localhost:8080/{d.pick(NOUNS)}s | jq ."))
    return {"command": cmd, "description": d.sentence(3, 7)}
