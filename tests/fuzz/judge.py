"""Run ``ctxsim`` in this process and judge what it did with bad input.

An outcome is one of:

* ``traceback`` — an exception escaped the command line, or it exited 1 (an internal error);
* ``hang`` — still running after its time limit;
* ``unclear`` — exit 2 with a message a user cannot act on: it does not name the file and the line
  (``path:line``; ``path:line:column`` for a JSON document), it holds a pydantic dump, a wrong
  "(truncated file?)" hint, or more than one line;
* ``silent`` — exit 0 on input that had to be refused (invalid JSON, an impossible count or time
  that changed the trace), or a result with a number that cannot be real (NaN, infinite,
  negative or absurd costs and token counts);
* ``ok`` — anything else (a clear refusal, or a harmless edit accepted).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PYDANTIC_DUMP = re.compile(r"validation errors? for|input_value=|input_type=|errors\.pydantic\.dev|\[type=")
ABSURD_TOKENS = 10 ** 10     # no session of any agent reads this many tokens (judge's own bound)
ABSURD_COST = 10 ** 7        # dollars for one session


@dataclass
class Outcome:
    command: list[str]
    status: int | None
    stdout: str
    stderr: str
    exception: str = ""

    @property
    def error_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip() and ": warning: " not in ln]


class Hang(BaseException):
    """A command still running after its time limit."""


def _alarm(signum, frame):
    raise Hang()


def run_cli(argv: list[str], limit_s: float = 120.0) -> Outcome:
    """``ctxsim ARGV`` in this process: its status, output and any exception that escaped. A
    command still running after ``limit_s`` is stopped and reported as a hang."""
    import signal
    import threading

    from ctxsim.harness.cli import main

    out, err = io.StringIO(), io.StringIO()
    status: int | None = None
    exc = ""
    timed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if timed:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, limit_s)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as e:   # argparse: exit 2 with its own usage message
            status = e.code if isinstance(e.code, int) else 2
        except Hang:
            exc = f"hang: still running after {limit_s:.0f} s"
        except BaseException as e:  # noqa: BLE001 - that is what is measured
            exc = "".join(traceback.format_exception_only(type(e), e)).strip()
            status = None
        finally:
            if timed:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
    return Outcome(argv, status, out.getvalue(), err.getvalue(), exc)


@dataclass
class Verdict:
    outcome: str            # traceback | unclear | silent | ok
    why: str = ""
    stage: str = ""         # which command: import | validate | run | fidelity
    message: str = ""


def judge_error(o: Outcome, path: Path, *, json_doc: bool, line: int | None = None,
                hint_ok: bool = False, stage: str = "") -> Verdict:
    """The verdict on a finished command that was fed the damaged file ``path``."""
    if o.exception.startswith("hang"):
        return Verdict("hang", o.exception, stage)
    if o.exception or o.status == 1 or o.status is None:
        return Verdict("traceback", o.exception or o.stderr.strip()[-300:], stage, o.stderr[-300:])
    if o.status == 0:
        return Verdict("ok", stage=stage)
    lines = o.error_lines
    msg = lines[-1] if lines else ""
    if "Traceback (most recent call last)" in o.stderr:
        return Verdict("traceback", "traceback text on stderr", stage, msg)
    if len(lines) != 1:
        return Verdict("unclear", f"{len(lines)} error lines", stage, o.stderr[-300:])
    if PYDANTIC_DUMP.search(msg):
        return Verdict("unclear", "pydantic dump", stage, msg)
    if "truncated file?" in msg and not hint_ok:
        return Verdict("unclear", "wrong truncated-file hint", stage, msg)
    pat = re.escape(str(path)) + (r":(\d+):(\d+)" if json_doc else r":(\d+)")
    m = re.search(pat, msg)
    if not m:
        return Verdict("unclear", "no file:line" + (":column" if json_doc else ""), stage, msg)
    if line is not None and int(m.group(1)) != line:
        return Verdict("unclear", f"names line {m.group(1)}, the damage is on line {line}", stage, msg)
    return Verdict("ok", stage=stage, message=msg)


def absurd_numbers(obj: Any, path: str = "") -> list[str]:
    """Numbers in a result that cannot be real: NaN, infinite, negative or absurd costs and counts."""
    bad: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            bad += absurd_numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            bad += absurd_numbers(v, f"{path}[{i}]")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        # fidelity's hidden-content deltas and pinned residuals are signed by design (a context the
        # replay over-estimates): not a count
        signed = "hidden_tokens" in path or "pinned" in path
        if isinstance(obj, float) and not math.isfinite(obj):
            bad.append(f"{path}={obj}")
        elif "cost" in path and not path.endswith(("pct_error", "abs_pct_error")) and (obj < 0 or obj > ABSURD_COST):
            bad.append(f"{path}={obj}")
        elif ("tokens" in path or path.startswith("tokens")) and "error" not in path and (
                (obj < -1 and not signed) or abs(obj) > ABSURD_TOKENS):
            bad.append(f"{path}={obj}")
    return bad


def json_of(o: Outcome) -> Any:
    try:
        return json.loads(o.stdout)
    except ValueError:
        return None


@dataclass
class Tally:
    """Counts of verdicts by family and outcome, and a few examples of each."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    examples: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def add(self, family: str, v: Verdict, what: str) -> None:
        key = (family, v.outcome)
        self.counts[key] = self.counts.get(key, 0) + 1
        if v.outcome != "ok":
            ex = self.examples.setdefault((family, f"{v.outcome}: {v.why}"), [])
            if len(ex) < 3:
                ex.append(f"{what} [{v.stage}] {v.message.strip()[:240]}")

    def total(self, outcome: str | None = None) -> int:
        return sum(n for (f, o), n in self.counts.items() if outcome is None or o == outcome)

    def failures(self) -> int:
        return sum(n for (f, o), n in self.counts.items() if o != "ok")

    def table(self) -> str:
        fams = sorted({f for f, _ in self.counts})
        cols = ["traceback", "hang", "unclear", "silent", "ok"]
        rows = [f"{'family':<28}" + "".join(f"{c:>11}" for c in cols) + f"{'cases':>8}"]
        for f in fams:
            n = [self.counts.get((f, c), 0) for c in cols]
            rows.append(f"{f:<28}" + "".join(f"{x:>11}" for x in n) + f"{sum(n):>8}")
        n = [self.total(c) for c in cols]
        rows.append(f"{'all':<28}" + "".join(f"{x:>11}" for x in n) + f"{sum(n):>8}")
        return "\n".join(rows)

    def why_table(self) -> str:
        out = []
        for (fam, why), ex in sorted(self.examples.items()):
            out.append(f"{fam} — {why}")
            out += [f"    {e}" for e in ex]
        return "\n".join(out)
