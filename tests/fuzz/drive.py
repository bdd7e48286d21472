"""Feed damaged logs and traces through ``import`` → ``validate`` → ``run`` → ``fidelity`` and
tally the verdicts (:mod:`tests.fuzz.judge`).

The real logs are read by path (``<repo>/../shared/traces/real``), never copied; a mutant is
written to a scratch folder under the log's own name (with a Claude Code session's
``<session>/subagents/`` beside it, so the sub-agent files can be damaged too).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz import damage
from tests.fuzz.judge import Tally, Verdict, absurd_numbers, json_of, judge_error, run_cli

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / ".." / "shared" / "traces" / "real"
JSON_DOCS = ("swe-agent", "openhands")
# kinds whose damage is on one line that the refusal must name
LOCAL = ("bad_utf8", "nul", "nonfinite", "digits")


@dataclass(frozen=True)
class Source:
    fmt: str                   # an importer name, or "trace" for the trace loader
    path: Path                 # the file (a real log read in place, or a trace)
    head: int | None = None    # JSONL: only its first lines (a smaller real log for the fast sample)
    sub: str | None = None     # damage this file of the session's subagents/ folder instead

    @property
    def name(self) -> str:
        tail = f"[:{self.head}]" if self.head else ""
        return f"{self.fmt}:{self.path.name}{tail}" + (f"/{self.sub}" if self.sub else "")

    def data(self) -> bytes:
        p = self.path.with_suffix("") / "subagents" / self.sub if self.sub else self.path
        raw = p.read_bytes()
        if self.head:
            raw = b"".join(raw.splitlines(keepends=True)[:self.head])
        return raw


def real_sources(fast: bool) -> list[Source]:
    """The real logs of every format; ``fast``: the small ones (and a head of the Codex rollout)."""
    if not REAL.is_dir():
        return []
    cc, cdx = REAL / "claude-code", REAL / "codex"
    rollout = next(iter(sorted(cdx.glob("rollout-*.jsonl"))), None)
    out = [Source("claude-code", cc / "spotter" / "short.jsonl"),
           Source("claude-code", cc / "spotter" / "tool_heavy.jsonl"),
           Source("swe-agent", REAL / "swe-agent" / "6e44b9__sweagenttestrepo-1c2844.traj"),
           Source("openhands", REAL / "openhands" / "basic_gui_mode.json")]
    if rollout:
        out.append(Source("codex", rollout, head=60))
    if fast:
        return [s for s in out if s.path.exists()]
    big = next(iter(sorted((cc / "spotter").glob("258c7280*.jsonl"))), None)
    out += [Source("claude-code", cc / "spotter" / "subagent.jsonl"),
            Source("claude-code", cc / "codemie" / "session-196820da.jsonl"),
            Source("swe-agent", REAL / "swe-agent" / "pydicom__pydicom-1458.traj")]
    if rollout:
        out.append(Source("codex", rollout))
    if big:
        subs = sorted(p.name for p in (big.with_suffix("") / "subagents").glob("*.jsonl"))
        out += [Source("claude-code", big, head=400)] + [Source("claude-code", big, sub=s) for s in subs]
    return [s for s in out if s.path.exists()]


def _place(src: Source, data: bytes, work: Path) -> tuple[Path, Path]:
    """Write the mutant under the log's own name in a fresh folder; returns (the file to import,
    the damaged file)."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    main = work / src.path.name
    if src.sub:   # the session's own main file, its subagents/ folder with one file damaged
        main.write_bytes(src.path.read_bytes()[: None])
        sub_dir = work / src.path.stem / "subagents"
        shutil.copytree(src.path.with_suffix("") / "subagents", sub_dir)
        damaged = sub_dir / src.sub
        damaged.chmod(0o644)
        damaged.write_bytes(data)
        return main, damaged
    main.write_bytes(data)
    side = src.path.with_suffix("")
    if src.fmt == "claude-code" and (side / "subagents").is_dir() and not src.head:
        shutil.copytree(side, work / src.path.stem)
    return main, main


def _comparable(path: Path):
    from ctxsim.harness.model import trace as tr

    t = tr.load(path)
    h = t.header.model_dump(exclude={"name", "source", "notes"})
    return h, [e.model_dump() for e in t.events]


def _after(out: Path, tally: Tally, family: str, what: str, per_call: bool) -> None:
    """What ``validate`` accepts must also run and (with per-call usage) go through fidelity."""
    v = run_cli(["validate", str(out)])
    if v.status != 0:
        tally.add(family, judge_error(v, out, json_doc=False, stage="validate"), what)
        return
    checks = [("run", ["run", str(out), "-s", "recorded" if per_call else "append_only", "--json", "-", "-q"])]
    if per_call:
        checks.append(("fidelity", ["fidelity", str(out), "--json", "-"]))
    for stage, argv in checks:
        o = run_cli(argv)
        if o.exception.startswith("hang"):
            tally.add(family, Verdict("hang", o.exception, stage), what)
            return
        if o.exception or o.status not in (0, 2):
            tally.add(family, Verdict("traceback", o.exception or o.stderr[-200:], stage, o.stderr[-200:]), what)
            return
        if o.status == 2:
            msg = (o.error_lines or [""])[-1]
            if stage == "run" or str(out) not in msg:
                tally.add(family, Verdict("unclear", f"validate accepts, {stage} refuses", stage, msg), what)
                return
            continue
        bad = absurd_numbers(json_of(o))
        if bad:
            tally.add(family, Verdict("silent", "impossible number in the result", stage, ", ".join(bad[:3])), what)
            return
    tally.add(family, Verdict("ok"), what)


def fuzz_logs(sources: Iterable[Source], per_source: int, seed: int, work: Path, tally: Tally,
              kinds: tuple[str, ...] = damage.KINDS, after: bool = True) -> None:
    """``per_source`` mutants of each real log through import (and what import accepts through
    validate, run and fidelity)."""
    for si, src in enumerate(sources):
        base_out = work / "baseline" / f"{si}.jsonl"
        base = run_cli(["import", src.fmt, str(_place(src, src.data(), work / "src")[0]), "-o", str(base_out),
                        "--no-probes"])
        baseline = _comparable(base_out) if base.status == 0 else None
        json_doc = src.fmt in JSON_DOCS and not src.sub
        for m in damage.mutants(src.data(), not json_doc, per_source, seed * 1_000 + si, kinds):
            family = f"log:{src.fmt}"
            what = f"{src.name} {m.describe()}"
            target, damaged = _place(src, m.data, work / "src")
            out = work / "out" / f"{si}.jsonl"
            if out.exists():
                out.unlink()
            o = run_cli(["import", src.fmt, str(target), "-o", str(out), "--no-probes"])
            line = m.line if (not json_doc and (m.kind in LOCAL or (m.must_reject and m.kind in damage.IMPOSSIBLE))) else None
            v = judge_error(o, damaged, json_doc=json_doc and damaged == target, line=line,
                            hint_ok=m.kind == "truncate", stage="import")
            if v.outcome != "ok" or o.status != 0:
                tally.add(family, v, what)
                continue
            # (a bad timestamp in a record the importer ignores, e.g. Claude Code's progress records,
            # never enters the trace: it is judged by the trace below, like an impossible count)
            if m.must_reject and (m.kind in LOCAL or (m.kind == "deep" and "50000" in m.detail)):
                tally.add(family, Verdict("silent", f"{m.kind} accepted", "import", m.detail), what)
                continue
            if m.must_reject and baseline is not None and _comparable(out) != baseline:
                tally.add(family, Verdict("silent", f"impossible {m.kind} read into the trace", "import", m.detail), what)
                continue
            if after:
                _after(out, tally, family, what, per_call=src.fmt not in ("swe-agent",))
            else:
                tally.add(family, Verdict("ok"), what)


def fuzz_traces(traces: Iterable[Path], per_trace: int, seed: int, work: Path, tally: Tally,
                kinds: tuple[str, ...] = damage.KINDS) -> None:
    """``per_trace`` mutants of each trace through the loader (validate), and what it accepts
    through run and fidelity."""
    from ctxsim.harness.model import trace as tr

    for ti, path in enumerate(traces):
        per_call = tr.load(path).header.usage == "per_call"
        for m in damage.mutants(path.read_bytes(), True, per_trace, seed * 1_000 + ti, kinds):
            what = f"trace:{path.name} {m.describe()}"
            p = work / "trace" / path.name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(m.data)
            o = run_cli(["validate", str(p)])
            free = any(k in ("meta", "source", "notes", "input") for k in m.node if isinstance(k, str))
            line = m.line if (m.kind in LOCAL or (m.must_reject and not free)) else None
            v = judge_error(o, p, json_doc=False, line=line, hint_ok=m.kind == "truncate", stage="validate")
            if v.outcome != "ok" or o.status != 0:
                tally.add("trace loader", v, what)
                continue
            if m.must_reject and not free:
                tally.add("trace loader", Verdict("silent", f"{m.kind} accepted", "validate", m.detail), what)
                continue
            _after(p, tally, "trace loader", what, per_call)
