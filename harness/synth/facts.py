"""Which real things of a session's content become facts, and how a fact is recognised again.

A fact is a line of text a later call needs, taken from where the agent meets it: a line of a file
it reads (a signature, a constant, a config value, the changed line a bug is in), the first
assertion line of a failing test run, the user's goal, constraint, preference or feedback, the
agent's own root-cause statement. Facts must be checkable strings: a file line is a fact only when
it is distinctive (at least :data:`MIN_FACT_CHARS` characters, once in the whole corpus), so finding
it in a request means the request holds that line; every fact text is unique in the trace.
"""

from __future__ import annotations

import re

from ctxsim.harness.synth.corpus import Corpus, SourceFile

MIN_FACT_CHARS = 20     # shorter lines ("return rv") recur everywhere: not checkable (assumed)
_CONST = re.compile(r"^[A-Z][A-Z0-9_]+\s*(:[^=]+)?=\s*\S")
_CONFIG = re.compile(r"^[\w.\-]+\s*=\s*\S")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def distinctive(corpus: Corpus, line: str) -> bool:
    s = line.strip()
    return len(s) >= MIN_FACT_CHARS and corpus.line_counts[s] == 1


def def_line(f: SourceFile, first: int, last: int) -> int | None:
    """The ``def``/``class`` line of a block whose span (decorators included) is ``first..last``."""
    for ln in range(first, min(last, first + 12) + 1):
        s = f.lines[ln - 1].lstrip()
        if s.startswith(("def ", "async def ", "class ")):
            return ln
    return None


def signature(f: SourceFile, line: int) -> str:
    """The ``def`` at ``line`` as one line: its lines up to the closing ``:``, whitespace collapsed."""
    parts = []
    for ln in range(line, min(len(f.lines), line + 12) + 1):
        parts.append(f.lines[ln - 1].strip())
        if parts[-1].endswith(":"):
            break
    return " ".join(parts).replace("( ", "(").replace(" )", ")").replace(",)", ")")


def kind_of_line(path: str, line: str) -> str:
    """What a file line is, for the fact's description: signature, constant, config or code."""
    s = line.strip()
    if s.startswith(("def ", "async def ", "class ")):
        return "signature"
    if path.endswith((".toml", ".ini", ".cfg", ".txt")) and _CONFIG.match(s):
        return "config"
    if _CONST.match(s):
        return "constant"
    return "code"


def file_fact_lines(corpus: Corpus, path: str, lines, first: int, last: int) -> list[int]:
    """Lines of ``first..last`` worth a fact: distinctive signatures, constants and config values
    first, then other distinctive code lines."""
    good, other = [], []
    for ln in range(first, last + 1):
        text = lines[ln - 1]
        if not distinctive(corpus, text):
            continue
        (good if kind_of_line(path, text) != "code" else other).append(ln)
    return good + other


def error_line(output: str, taken: set[str]) -> str | None:
    """The fact a failing run shows: its first distinctive assertion line (``E   ...``), else the
    first ``FAILED`` summary line, not already a fact."""
    cands = [ln.strip() for ln in output.split("\n") if ln.startswith("E ") and len(ln.strip()) >= MIN_FACT_CHARS + 5]
    cands += [ln.strip() for ln in output.split("\n") if ln.startswith("FAILED ")]
    return next((c for c in cands if c not in taken), None)


_COMMON = frozenset("self None True False return value values import from lambda class async await isinstance "
                    "super assert raise yield while print".split())


def identifier_of(line: str) -> str | None:
    """The longest identifier in a line that is not a keyword or a common name (a grep pattern that
    finds the line again without finding half the project)."""
    ids = [i for i in _IDENT.findall(line) if i not in _COMMON]
    return max(ids, key=len) if ids else None
