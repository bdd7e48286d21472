"""Is a trace's tool output real text? Two checks any trace can be put through (issue 16).

* :func:`read_parse_share`: of the ``Read`` results of ``.py`` files, the share that parse as Python
  once the line-number prefix Claude Code's Read adds (``{n:>6}→`` or ``{n:>6}\\t``) is stripped;
  a read of a class body's statements counts when it parses after a dedent.
* :func:`grep_contains_share`: of the ``Grep`` results, the share that contain their pattern (as a
  regular expression; a pattern that is not a valid one is searched as a literal string).

``python -m ctxsim.harness.synth.checks TRACE`` prints both.
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
import warnings

from ctxsim.harness.model import trace as tr

_PREFIX = re.compile(r"^ *\d+(?:\u2192|\t)", re.M)


def strip_numbers(text: str) -> str:
    return _PREFIX.sub("", text)


def parses(code: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # invalid escape sequences in old code are warnings, not errors
        for candidate in (code, textwrap.dedent(code)):
            try:
                ast.parse(candidate)
                return True
            except (SyntaxError, ValueError):
                continue
    return False


def _pairs(trace: tr.Trace, tool: str):
    uses = {}
    for e in trace.events:
        if isinstance(e, tr.AssistantEvent):
            for u in e.tool_uses():
                if u.name == tool:
                    uses[u.id] = u.input
        elif isinstance(e, tr.ToolResultEvent) and e.tool_use_id in uses:
            yield uses.pop(e.tool_use_id), e


def read_parse_share(trace: tr.Trace) -> tuple[int, int]:
    """(Read results of .py files that parse, Read results of .py files)."""
    ok = n = 0
    for inp, res in _pairs(trace, "Read"):
        if str(inp.get("file_path", "")).endswith(".py") and not res.is_error:
            n += 1
            ok += parses(strip_numbers(res.content))
    return ok, n


def grep_contains_share(trace: tr.Trace) -> tuple[int, int]:
    """(Grep results that contain their pattern, Grep results)."""
    ok = n = 0
    for inp, res in _pairs(trace, "Grep"):
        pat = str(inp.get("pattern", ""))
        n += 1
        try:
            hit = re.search(pat, res.content) is not None
        except re.error:
            hit = pat in res.content
        ok += hit
    return ok, n


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for path in argv:
        t = tr.load(path)
        r, g = read_parse_share(t), grep_contains_share(t)
        print(f"{path}: Read of .py parses {r[0]}/{r[1]}; Grep contains its pattern {g[0]}/{g[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
