"""Hand-made bad input: command lines a careful user might type, and traces that look plausible
but cannot be replayed. Each case says what a good refusal names (an option, a file) and, for
outputs, what must not be left behind.

:func:`fixtures` writes the files the cases point at into a scratch folder; ``{T}`` (a short
synthetic trace), ``{I}`` (an imported Claude Code trace, when the real logs are present), ``{F}``
(a regular file, so ``{F}/x`` cannot be created), ``{D}`` (an empty folder) and ``{W}`` (the
scratch folder) are filled in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.judge import PYDANTIC_DUMP, Outcome, Verdict, run_cli


@dataclass(frozen=True)
class Case:
    argv: str                       # the command line, with {T} {I} {F} {D} {W} placeholders
    names: str                      # what the one-line refusal must mention (an option or a file)
    leaves_no: tuple[str, ...] = ()  # paths that must not exist afterwards
    needs_real: bool = False
    status: int = 2


# placeholders only the real logs fill: {I} (a trace imported from one) and {W}/cc.jsonl, {W}/ccdir (copies of one)
_REAL_PLACEHOLDERS = ("{I}", "{W}/cc")


def _c(argv: str, names: str, *leaves: str, real: bool = False) -> Case:
    return Case(argv, names, tuple(leaves), real or any(p in argv for p in _REAL_PLACEHOLDERS))


RUN = "run {T} -s append_only -q"
COMMAND_LINES: list[Case] = [
    # --- synth -----------------------------------------------------------------------------------
    _c("synth short --seed -1 -o {W}/s.jsonl", "--seed", "{W}/s.jsonl"),
    _c("synth nosuch -o {W}/s.jsonl", "nosuch"),
    _c("synth short --set nosuch=1 -o {W}/s.jsonl", "nosuch"),
    _c("synth short --set calls=-5 -o {W}/s.jsonl", "calls"),
    _c("synth short --set calls=abc -o {W}/s.jsonl", "calls"),
    _c("synth short --set calls=nan -o {W}/s.jsonl", "calls"),
    _c("synth short --set noequals -o {W}/s.jsonl", "noequals"),
    _c("synth short -o {F}/s.jsonl", "{F}/s.jsonl"),
    _c("synth short -o {D}", "{D}"),
    _c("synth {W}/missing.toml -o {W}/s.jsonl", "missing.toml"),
    _c("synth {W}/bad.toml -o {W}/s.jsonl", "bad.toml"),
    _c("synth short --seed 99999999999999999999999 -o {W}/s.jsonl", "--seed"),
    # --- import ----------------------------------------------------------------------------------
    _c("import claude-code {W}/nope.jsonl -o {W}/o.jsonl", "nope.jsonl"),
    _c("import claude-code {W}/cc.jsonl -o {W}/cc.jsonl", "-o"),
    _c("import claude-code {W}/ccdir -o {W}/ccdir", "-o"),
    _c("import claude-code {W}/ccdir -o {W}/ccdir/traces", "-o"),
    _c("import claude-code {W}/cc.jsonl -o {F}/o.jsonl", "{F}/o.jsonl"),
    _c("import claude-code {W}/cc.jsonl -o {D}", "-o"),
    _c("import claude-code {D} -o {W}/o", "{D}"),
    _c("import swe-agent {D} -o {W}/o.jsonl", "{D}"),
    _c("import claude-code {W}/ccdir -o {W}/o --since 2026-02-01 --until 2026-01-01", "--since"),
    _c("import claude-code {W}/cc.jsonl -o {W}/o.jsonl --since 2026-13-01", "--since"),
    _c("import claude-code {W}/cc.jsonl -o {W}/o.jsonl --models {W}/missing.toml", "missing.toml", "{W}/o.jsonl"),
    _c("import claude-code {W}/cc.jsonl -o {W}/o.jsonl --models {W}/bad.toml", "bad.toml", "{W}/o.jsonl"),
    _c("import openhands {W}/cc.jsonl -o {W}/o.jsonl", "cc.jsonl", "{W}/o.jsonl"),
    _c("import swe-agent {W}/cc.jsonl -o {W}/o.jsonl", "cc.jsonl", "{W}/o.jsonl"),
    _c("import codex {W}/cc.jsonl -o {W}/o.jsonl", "cc.jsonl", "{W}/o.jsonl"),
    _c("import claude-code {T} -o {W}/o.jsonl", "{T}", "{W}/o.jsonl"),
    _c("import nosuch {W}/cc.jsonl -o {W}/o.jsonl", "nosuch"),
    # --- validate, strategies, probes --------------------------------------------------------------
    _c("validate {W}/nope.jsonl", "nope.jsonl"),
    _c("validate {D}", "{D}"),
    _c("validate {W}/empty.jsonl", "empty.jsonl"),
    _c("validate {W}/binary.jsonl", "binary.jsonl"),
    _c("strategies nosuch", "nosuch"),
    _c("probes {W}/nope.jsonl -o {W}/p.jsonl", "nope.jsonl"),
    _c("probes {T} -o {F}/p.jsonl", "{F}/p.jsonl"),
    # --- run: the strategy -------------------------------------------------------------------------
    _c("run {T} -s nosuch", "nosuch"),
    _c("run {W}/nope.jsonl -s append_only", "nope.jsonl"),
    _c("run {T} -s append_only --set x=1", "x"),
    _c("run {T} -s append_only --set noequals", "noequals"),
    _c("run {T} -s novacode --set soft_margin=-1", "soft_margin"),
    _c("run {T} -s novacode --set soft_margin=10", "soft_margin"),
    _c("run {T} -s novacode --set tail_min_tokens=50000 --set tail_max_tokens=1000", "tail_min_tokens"),
    _c("run {T} -s cut_no_summary --set tail_min_tokens=50000 --set tail_max_tokens=1000", "tail_min_tokens"),
    _c("run {T} -s novacode --set breaker_cooldown_s=inf", "breaker_cooldown_s"),
    _c("run {T} -s novacode --set breaker_cooldown_s=nan", "breaker_cooldown_s"),
    _c("run {T} -s codex --set auto_compact_fraction=nan", "auto_compact_fraction"),
    _c("run {T} -s codex --set auto_compact_fraction=0", "auto_compact_fraction"),
    _c("run {T} -s novacode --set compaction=maybe", "compaction"),
    _c("run {T} -s nosuch.module:Thing", "nosuch.module"),
    _c("run {T} -s ctxsim.harness.model.trace:Header", "ctxsim.harness.model.trace:Header"),
    _c("run {T} -s recorded", "recorded"),
    # --- run: the provider options -----------------------------------------------------------------
    _c(RUN + " --seed -1", "--seed"),
    _c(RUN + " --seed 99999999999999999999999", "--seed"),
    _c(RUN + " --window 0", "--window"),
    _c(RUN + " --window -5", "--window"),
    _c(RUN + " --window 99999999999999", "--window"),
    _c(RUN + " --model nosuch-model", "nosuch-model"),
    _c(RUN + " --model ''", "--model"),
    _c(RUN + " --cache-ttl 2h", "--cache-ttl"),
    _c(RUN + " --token-scale nan", "--token-scale"),
    _c(RUN + " --token-scale inf", "--token-scale"),
    _c(RUN + " --token-scale 0", "--token-scale"),
    _c(RUN + " --token-scale -1", "--token-scale"),
    _c(RUN + " --token-scale 1e9", "--token-scale"),
    _c(RUN + " --fail typo=0.5", "typo"),
    _c(RUN + " --fail summary=2", "--fail"),
    _c(RUN + " --fail summary=-0.1", "--fail"),
    _c(RUN + " --fail summary=nan", "--fail"),
    _c(RUN + " --fail summary", "--fail"),
    _c(RUN + " --fail =0.5", "--fail"),
    _c(RUN + " --llm replay", "--llm-store"),
    _c(RUN + " --llm replay --llm-store {W}/nostore.jsonl", "nostore.jsonl"),
    _c(RUN + " --llm replay --llm-store {W}/bad-store.jsonl", "bad-store.jsonl"),
    _c(RUN + " --llm-store {W}/store.jsonl", "--llm-store"),
    _c(RUN + " --llm live --llm-timeout 0", "--llm-timeout"),
    _c(RUN + " --models {W}/missing.toml", "missing.toml"),
    _c(RUN + " --models {W}/bad.toml", "bad.toml"),
    _c(RUN + " --models {W}/badrow.toml", "badrow.toml"),
    _c(RUN + " --retention nosuch=1", "nosuch"),
    _c(RUN + " --retention summary_fidelity=2", "summary_fidelity"),
    _c(RUN + " --retention summary_fidelity=nan", "summary_fidelity"),
    _c(RUN + " --retention noequals", "--retention"),
    _c(RUN + " --summariser nosuch=1", "nosuch"),
    _c(RUN + " --summariser fact_share=-1", "fact_share"),
    _c(RUN + " --summariser fact_share=nan", "fact_share"),
    _c(RUN + " --summariser fact_share=inf", "fact_share"),
    # --- run: outputs --------------------------------------------------------------------------------
    _c(RUN + " --json {F}/m.json --calls {W}/calls.csv", "{F}/m.json", "{W}/calls.csv"),
    _c(RUN + " --json {D}", "{D}"),
    _c(RUN + " --calls {W}/calls.txt --json {W}/m.json", "--calls", "{W}/m.json"),
    _c(RUN + " --calls {F}/calls.csv --json {W}/m.json", "{F}/calls.csv", "{W}/m.json"),
    _c(RUN + " --calls {D}", "{D}"),
    _c(RUN + " --session-dir {F}", "--session-dir"),
    _c(RUN + " --json {T}", "--json"),
    _c(RUN + " --calls {T}.csv --json {T}.csv", "--json"),
    # --- compare -------------------------------------------------------------------------------------
    _c("compare {T} -s append_only,append_only", "--strategies"),
    _c("compare {T} -s ,", "--strategies"),
    _c("compare {T} -s nosuch", "nosuch"),
    _c("compare {T} -s append_only --set nosuch.k=1", "nosuch"),
    _c("compare {T} -s append_only --set append_only.k=1", "k"),
    _c("compare {T} -s append_only --set bad", "--set"),
    _c("compare {T} -s append_only --seeds 0", "--seeds"),
    _c("compare {T} -s append_only --seeds -1", "--seeds"),
    _c("compare {T} -s append_only --seeds 100000", "--seeds"),
    _c("compare {T} -s append_only --seed -1", "--seed"),
    _c("compare {T} -s append_only --token-scale nan", "--token-scale"),
    _c("compare {T} -s append_only --window 0", "--window"),
    _c("compare {T} -s append_only --json {F}/c.json", "{F}/c.json"),
    _c("compare {T} -s append_only --report {F}/r", "{F}/r"),
    _c("compare {T} {W}/nope.jsonl -s append_only", "nope.jsonl"),
    _c("compare {T} -s recorded", "recorded"),
    # --- fidelity --------------------------------------------------------------------------------------
    _c("fidelity {T}", "{T}"),
    _c("fidelity {W}/nope.jsonl", "nope.jsonl"),
    _c("fidelity {I} --fit-fraction 0", "--fit-fraction", real=True),
    _c("fidelity {I} --fit-fraction 1", "--fit-fraction", real=True),
    _c("fidelity {I} --fit-fraction nan", "--fit-fraction", real=True),
    _c("fidelity {I} --token-scale nan", "--token-scale", real=True),
    _c("fidelity {I} --token-scale inf", "--token-scale", real=True),
    _c("fidelity {I} --token-scale 0", "--token-scale", real=True),
    _c("fidelity {I} --model nosuch-model", "nosuch-model", real=True),
    _c("fidelity {I} --json {F}/f.json", "{F}/f.json", real=True),
    _c("fidelity {I} --figure {F}/f.png", "{F}/f.png", real=True),
    _c("fidelity {I} --figure {W}/f.txt", "--figure", real=True),
    _c("fidelity {I} --calls {F}/f.csv --json {W}/f.json", "{F}/f.csv", "{W}/f.json", real=True),
    # --- sweep -------------------------------------------------------------------------------------------
    _c("sweep {W}/missing.toml --out {W}/sw", "missing.toml", "{W}/sw"),
    _c("sweep {W}/bad.toml --out {W}/sw", "bad.toml", "{W}/sw"),
    _c("sweep {W}/sw-window0.toml --out {W}/sw", "windows", "{W}/sw"),
    _c("sweep {W}/sw-windowneg.toml --out {W}/sw", "windows", "{W}/sw"),
    _c("sweep {W}/sw-model.toml --out {W}/sw", "nosuch-model", "{W}/sw"),
    _c("sweep {W}/sw-noseeds.toml --out {W}/sw", "seeds", "{W}/sw"),
    _c("sweep {W}/sw-negseed.toml --out {W}/sw", "seeds", "{W}/sw"),
    _c("sweep {W}/sw-nostrategies.toml --out {W}/sw", "strategies", "{W}/sw"),
    _c("sweep {W}/sw-notraces.toml --out {W}/sw", "traces", "{W}/sw"),
    _c("sweep {W}/sw-nomatch.toml --out {W}/sw", "nomatch", "{W}/sw"),
    _c("sweep {W}/sw-emptygrid.toml --out {W}/sw", "grid", "{W}/sw"),
    _c("sweep {W}/sw-badparam.toml --out {W}/sw", "soft_margin", "{W}/sw"),
    _c("sweep {W}/sw-unknown.toml --out {W}/sw", "nosuch", "{W}/sw"),
    _c("sweep {W}/sw-target.toml --out {W}/sw", "retention_target", "{W}/sw"),
    _c("sweep {W}/sw-preset.toml --out {W}/sw", "nosuch", "{W}/sw"),
    _c("sweep {W}/sw-presetseed.toml --out {W}/sw", "preset_seeds", "{W}/sw"),
    _c("sweep {W}/sw-presetset.toml --out {W}/sw", "nosuch", "{W}/sw"),
    _c("sweep {W}/sw-nocache.toml --out {W}/sw", "cache", "{W}/sw"),
    _c("sweep {W}/sw-badtrace.toml --out {W}/sw", "damaged.jsonl", "{W}/sw"),
    _c("sweep {W}/sw-recorded.toml --out {W}/sw", "recorded", "{W}/sw"),
    _c("sweep {W}/sw-ok.toml --out {W}/sw --workers 0", "--workers", "{W}/sw"),
    _c("sweep {W}/sw-ok.toml --out {W}/sw --limit -1", "--limit", "{W}/sw"),
    _c("sweep {W}/sw-ok.toml --out {W}/sw --target 5", "--target", "{W}/sw"),
    _c("sweep {W}/sw-ok.toml --out {W}/sw --target nan", "--target", "{W}/sw"),
    _c("sweep {W}/sw-ok.toml --out {W}/sw --executor dask", "--scheduler", "{W}/sw"),
    _c("sweep {W}/sw-ok.toml --out {F}", "--out"),
    _c("sweep {W}/sw-ok.toml --out {F}/sw", "{F}/sw"),
    # --- report -------------------------------------------------------------------------------------------
    _c("report {W}/nosweep", "nosweep"),
    _c("report {D}", "{D}"),
    _c("report {W}/sweep-done --target 5", "--target"),
    _c("report {W}/sweep-done --target -1", "--target"),
    _c("report {W}/sweep-done --target nan", "--target"),
    _c("report {W}/sweep-done --out {F}", "--out"),
    _c("report {F}", "{F}"),
    # --- check-strategy, calibrate ---------------------------------------------------------------------------
    _c("check-strategy nosuch.module:Thing", "nosuch.module"),
    _c("check-strategy append_only --window -1", "--window"),
    _c("check-strategy append_only --shrink-seconds -1", "--shrink-seconds"),
    _c("check-strategy append_only --replay {W}/nope.jsonl", "nope.jsonl"),
    _c("check-strategy append_only --set x=1", "x"),
    _c("calibrate --max-compactions -1", "--max-compactions"),
    _c("calibrate --window 0", "--window"),
    _c("calibrate-summariser {W}/nope.jsonl", "nope.jsonl"),
]

SWEEP_BODY = """
traces = [{traces}]
{extra}
[[strategies]]
name = "{strategy}"
{strategy_extra}
"""


def _sweep(traces: str = '"{T}"', extra: str = "seeds = [0]", strategy: str = "append_only", strategy_extra: str = "") -> str:
    return SWEEP_BODY.format(traces=traces, extra=extra, strategy=strategy, strategy_extra=strategy_extra)


SWEEPS = {
    "sw-ok": _sweep(),
    "sw-window0": _sweep(extra="seeds = [0]\nwindows = [0]"),
    "sw-windowneg": _sweep(extra="seeds = [0]\nwindows = [-200000]"),
    "sw-model": _sweep(extra='seeds = [0]\nmodels = ["nosuch-model"]'),
    "sw-noseeds": _sweep(extra="seeds = []"),
    "sw-negseed": _sweep(extra="seeds = [-1]"),
    "sw-nostrategies": 'traces = ["{T}"]\nseeds = [0]\nstrategies = []\n',
    "sw-notraces": _sweep(traces=""),
    "sw-nomatch": _sweep(traces='"nomatch*.jsonl"'),
    "sw-emptygrid": _sweep(strategy="novacode", strategy_extra="grid = { soft_margin = [] }"),
    "sw-badparam": _sweep(strategy="novacode", strategy_extra="grid = { soft_margin = [-5] }"),
    "sw-unknown": _sweep(strategy="nosuch"),
    "sw-target": _sweep(extra="seeds = [0]\nretention_target = 5"),
    "sw-preset": _sweep(traces='"preset:nosuch"'),
    "sw-presetseed": _sweep(traces='"preset:short"', extra="seeds = [0]\npreset_seeds = [-1]"),
    "sw-presetset": _sweep(traces='"preset:short"', extra="seeds = [0]\npreset_set = { nosuch = 1 }"),
    "sw-nocache": _sweep(extra="seeds = [0]\ncache = []"),
    "sw-badtrace": _sweep(traces='"{W}/damaged.jsonl"'),
    "sw-recorded": _sweep(strategy="recorded"),
}


# --- hand-made traces ------------------------------------------------------------------------------

def _hdr(**kw) -> dict:
    return {"type": "header", "format": "ctxsim-trace", "version": 1, "name": "hand", **kw}


def _session(*extra: dict, t0: float = 0.0) -> list[dict]:
    return [{"type": "user", "t": t0, "text": "fix the bug in app.py"},
            {"type": "assistant", "t": t0 + 1, "content": [{"type": "tool_use", "id": "tu1", "name": "Read",
                                                             "input": {"file_path": "app.py"}}]},
            {"type": "tool_result", "t": t0 + 2, "tool_use_id": "tu1", "content": "print('hi')"},
            {"type": "assistant", "t": t0 + 3, "content": [{"type": "text", "text": "done"}]}, *extra]


def _usage(**kw) -> dict:
    return {"input": 10, "cache_read": 1000, "output": 5, **kw}


def _percall(usage: dict, **hdr) -> list[dict]:
    lines = _session()
    for ln in lines:
        if ln["type"] == "assistant":
            ln["usage"] = dict(usage)
            ln["model"] = "claude-sonnet-4-6"
    return [_hdr(usage="per_call", model="claude-sonnet-4-6", **hdr), *lines]


REC = {"window": 200000, "token_scale": 1.2, "fit_calls": 1}

# name -> the lines of a trace (dicts; a str is written as is)
TRACES: dict[str, list] = {
    "header-only": [_hdr()],
    "header-only-percall": [_hdr(usage="per_call")],
    "no-call": [_hdr(), {"type": "user", "t": 0, "text": "hi"}],
    "t-infinity": [_hdr(), '{"type":"user","t":Infinity,"text":"hi"}', *_session()[1:]],
    "t-nan": [_hdr(), '{"type":"user","t":NaN,"text":"hi"}', *_session()[1:]],
    "t-string": [_hdr(), {"type": "user", "t": "12.5", "text": "hi"}, *_session(t0=13)[1:]],
    "t-iso-string": [_hdr(), {"type": "user", "t": "2026-01-01T00:00:00Z", "text": "hi"}, *_session()[1:]],
    "t-bool": [_hdr(), {"type": "user", "t": True, "text": "hi"}, *_session(t0=1)[1:]],
    "t-absurd": [_hdr(), *_session(t0=1e300)],
    "t-backwards": [_hdr(), *_session()[:2], {**_session()[2], "t": 0.5}, _session()[3]],
    "empty-tool-use-id": [_hdr(), _session()[0],
                          {"type": "assistant", "t": 1, "content": [{"type": "tool_use", "id": "", "name": "Read"}]},
                          {"type": "tool_result", "t": 2, "tool_use_id": "", "content": "x"}, _session()[3]],
    "empty-tool-name": [_hdr(), _session()[0],
                        {"type": "assistant", "t": 1, "content": [{"type": "tool_use", "id": "a", "name": ""}]},
                        {"type": "tool_result", "t": 2, "tool_use_id": "a", "content": "x"}, _session()[3]],
    "meta-files-list": [_hdr(meta={"files": ["CLAUDE.md"]}), *_session()],
    "meta-files-nonstring": [_hdr(meta={"files": {"project/CLAUDE.md": 5}}), *_session()],
    "meta-files-escape": [_hdr(meta={"files": {"../../etc/x": "y"}}), *_session()],
    "meta-files-absolute": [_hdr(meta={"files": {"/tmp/x": "y"}}), *_session()],
    "meta-files-dir": [_hdr(meta={"files": {"project": "y", "project/a.md": "z"}}), *_session()],
    "meta-read-tool": [_hdr(meta={"read_tool": {"x": 1}}), *_session()],
    "usage-negative": _percall(_usage(input=-5)),
    "usage-huge": _percall(_usage(cache_read=10 ** 30)),
    "usage-float": _percall(_usage(output=2.5)),
    "usage-string": _percall(_usage(output="5")),
    "usage-bool": _percall(_usage(output=True)),
    "prefix-negative": [_hdr(prefix_tokens=-1), *_session()],
    "prefix-huge": [_hdr(prefix_tokens=10 ** 20), *_session()],
    "compact-pre-huge": [_hdr(), *_session(), {"type": "compact", "t": 4, "pre_tokens": 10 ** 20},
                         {"type": "assistant", "t": 5, "content": [{"type": "text", "text": "ok"}]}],
    "recorded-window-0": _percall(_usage(), recorded={**REC, "window": 0}),
    "recorded-window-huge": _percall(_usage(), recorded={**REC, "window": 10 ** 15}),
    "recorded-scale-nan": [json.dumps(_percall(_usage())[0])[:-1] + ',"recorded":{"token_scale":NaN}}',
                           *_percall(_usage())[1:]],
    "recorded-scale-0": _percall(_usage(), recorded={**REC, "token_scale": 0}),
    "recorded-scale-absurd": _percall(_usage(), recorded={**REC, "token_scale": 1e300}),
    "recorded-scale-tiny": _percall(_usage(), recorded={**REC, "token_scale": 1e-300}),
    "recorded-fit-calls-over": _percall(_usage(), recorded={**REC, "fit_calls": 99}),
    "recorded-fit-calls-negative": _percall(_usage(), recorded={**REC, "fit_calls": -1}),
    "recorded-warm-over-prefix": _percall(_usage(), prefix_tokens=100, recorded={**REC, "warm_prefix_tokens": 5000}),
    "recorded-warm-negative": _percall(_usage(), recorded={**REC, "warm_prefix_tokens": -3}),
    "recorded-models-negative": _percall(_usage(), recorded={**REC, "models": {"claude-sonnet-4-6": {"main": -2}}}),
    "recorded-models-type": _percall(_usage(), recorded={**REC, "models": {"claude-sonnet-4-6": 2}}),
    "recorded-model-prefix-negative": _percall(_usage(), recorded={**REC, "model_prefix_tokens": {"claude-sonnet-4-6": -9}}),
    "recorded-subagent-prefix-huge": _percall(_usage(), recorded={**REC, "subagent_prefix_tokens": {"a": 10 ** 20}}),
    "recorded-ttl-bad": _percall(_usage(), recorded={**REC, "cache_ttl": "2h"}),
    "recorded-unknown-field": _percall(_usage(), recorded={**REC, "nosuch": 1}),
    "recorded-not-object": _percall(_usage(), recorded=[1, 2]),
    "model-unknown": [_hdr(model="nosuch-model"), *_session()],
    "event-model-unknown": [_hdr(), *_session()[:3], {**_session()[3], "model": "nosuch-model"}],
    "header-model-empty": [_hdr(model=""), *_session()],
    "header-name-empty": [{**_hdr(), "name": ""}, *_session()],
    "tools-bad": [_hdr(tools=[{"name": "Read", "input_schema": 5}]), *_session()],
    "system-nonstring": [_hdr(system=["a"]), *_session()],
    "fact-not-in-text": [_hdr(), _session()[0], {"type": "fact", "t": 0, "id": "f1", "category": "goal",
                                                 "text": "nowhere"}, *_session()[1:]],
    "probe-unknown-fact": [_hdr(), *_session()[:3], {"type": "probe", "t": 2, "id": "p1", "needs": ["f9"]},
                           _session()[3]],
    "probe-at-end": [_hdr(), *_session(), {"type": "probe", "t": 4, "id": "p1", "needs": []}],
    "subtask-never-ends": [_hdr(), *_session(), {"type": "subtask_start", "t": 4, "id": "s1"}],
    "session-end-mismatch": [_hdr(), {"type": "session_start", "t": 0, "session": "a"}, *_session(),
                             {"type": "session_end", "t": 4, "session": "b"}],
    "deep-input": [_hdr(), _session()[0], '{"type":"assistant","t":1,"content":[{"type":"tool_use","id":"a",'
                   '"name":"Read","input":{"x":' + "[" * 50_000 + "]" * 50_000 + '}}]}',
                   {"type": "tool_result", "t": 2, "tool_use_id": "a", "content": "x"}, _session()[3]],
    "huge-digits": [_hdr(prefix_tokens=0), '{"type":"user","t":' + "9" * 5000 + ',"text":"hi"}', *_session()[1:]],
    "bom": ["\ufeff" + json.dumps(_hdr()), *_session()],
    "bad-utf8-line6": [_hdr(), *_session(), b'{"type":"user","t":5,"text":"caf\xe9"}',
                       {"type": "assistant", "t": 6, "content": [{"type": "text", "text": "ok"}]}],
    "crlf": [_hdr(), *_session()],   # written with \r\n
    "trailing-garbage": [_hdr(), *_session(), "garbage"],
    "array-line": [_hdr(), *_session(), "[1, 2]"],
    "second-header": [_hdr(), *_session(), _hdr()],
}


def write_trace(path: Path, lines: list, crlf: bool = False) -> None:
    out = b""
    for ln in lines:
        b = ln if isinstance(ln, bytes) else (ln if isinstance(ln, str) else json.dumps(ln)).encode("utf-8")
        out += b + (b"\r\n" if crlf else b"\n")
    path.write_bytes(out)


def fixtures(work: Path, real: Path | None) -> dict[str, str]:
    """Write the files the cases need; returns the placeholder values."""
    work.mkdir(parents=True, exist_ok=True)
    t = work / "short.jsonl"
    if not t.exists():
        assert run_cli(["synth", "short", "--seed", "3", "-o", str(t)]).status == 0
    f = work / "afile"
    f.write_text("a regular file\n")
    d = work / "emptydir"
    d.mkdir(exist_ok=True)
    (work / "bad.toml").write_text("this is [not toml\n")
    (work / "badrow.toml").write_text('[nosuch-model]\ninput = "cheap"\n')
    (work / "empty.jsonl").write_bytes(b"")
    (work / "binary.jsonl").write_bytes(bytes(range(256)) * 4)
    (work / "bad-store.jsonl").write_text("not a store\n")
    (work / "damaged.jsonl").write_text(t.read_text()[:500])
    values = {"T": str(t), "F": str(f), "D": str(d), "W": str(work), "I": ""}
    for name, body in SWEEPS.items():
        (work / f"{name}.toml").write_text(body.replace("{T}", str(t)).replace("{W}", str(work)))
    if real is not None and real.is_dir():
        src = real / "claude-code" / "spotter" / "short.jsonl"
        cc = work / "cc.jsonl"
        cc.write_bytes(src.read_bytes())
        ccdir = work / "ccdir"
        ccdir.mkdir(exist_ok=True)
        (ccdir / "short.jsonl").write_bytes(src.read_bytes())
        imp = work / "imported.jsonl"
        if not imp.exists():
            assert run_cli(["import", "claude-code", str(cc), "-o", str(imp), "--no-probes"]).status == 0
        values["I"] = str(imp)
    done = work / "sweep-done"
    if not (done / "results.parquet").exists():
        run_cli(["sweep", str(work / "sw-ok.toml"), "--out", str(done), "--no-progress"])
    restore(values)
    return values


def restore(values: dict[str, str]) -> None:
    """Put the fixtures back as they were (a bad command line may have written over one)."""
    for k in ("T", "I"):
        if values[k]:
            pristine = Path(values[k] + ".pristine")
            if not pristine.exists():
                pristine.write_bytes(Path(values[k]).read_bytes())
            elif not Path(values[k]).is_file() or Path(values[k]).read_bytes() != pristine.read_bytes():
                _rm(Path(values[k]))
                Path(values[k]).write_bytes(pristine.read_bytes())
    f = Path(values["F"])
    if not f.is_file():
        _rm(f)
        f.write_text("a regular file\n")
    d = Path(values["D"])
    if not d.is_dir() or any(d.iterdir()):
        _rm(d)
        d.mkdir()


def fill(s: str, values: dict[str, str]) -> str:
    for k, v in values.items():
        s = s.replace("{" + k + "}", v)
    return s


def judge_case(case: Case, values: dict[str, str]) -> tuple[Verdict, Outcome]:
    import shlex

    for p in case.leaves_no:   # what a refusal must not leave behind starts absent
        _rm(Path(fill(p, values)))
    argv = shlex.split(fill(case.argv, values))
    restore(values)
    o = run_cli(argv, limit_s=60)
    restore(values)
    if o.exception.startswith("hang"):
        return Verdict("hang", o.exception, argv[0]), o
    if o.exception or o.status == 1 or o.status is None:
        return Verdict("traceback", o.exception or o.stderr[-200:], argv[0], o.stderr[-300:]), o
    if o.status == 0:
        return Verdict("silent", "exit 0", argv[0], o.stdout[-200:]), o
    lines = o.error_lines
    msg = " ".join(lines)
    if lines and lines[0].startswith("usage:"):
        msg = lines[-1]
    left = [p for p in case.leaves_no if Path(fill(p, values)).exists()]
    if left:
        return Verdict("unclear", "output left behind", argv[0], ", ".join(left)), o
    if "Traceback" in o.stderr:
        return Verdict("traceback", "traceback text", argv[0], msg), o
    if PYDANTIC_DUMP.search(msg):
        return Verdict("unclear", "pydantic dump", argv[0], msg), o
    want = fill(case.names, values)
    if want not in msg:
        return Verdict("unclear", f"does not name {case.names}", argv[0], msg[-300:]), o
    # argparse's own refusals are its usage, then one error line; ours are one line
    if len(lines) > 1 and not lines[0].startswith("usage:"):
        return Verdict("unclear", f"{len(lines)} error lines", argv[0], msg[-300:]), o
    return Verdict("ok", stage=argv[0], message=msg), o


def _rm(p: Path) -> None:
    import shutil

    if p.is_dir():
        shutil.rmtree(p)
    elif p.exists():
        p.unlink()


def judge_trace(name: str, lines: list, work: Path) -> list[tuple[str, Verdict]]:
    """validate, then (if it accepts) run and fidelity: no traceback; a refusal names the file and
    a line; what validate accepts, run accepts too."""
    from tests.fuzz.judge import absurd_numbers, json_of, judge_error

    p = work / "hand" / f"{name}.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    write_trace(p, lines, crlf=name == "crlf")
    v = run_cli(["validate", str(p)])
    out = []
    verdict = judge_error(v, p, json_doc=False, line=LINE.get(name), stage="validate")
    if verdict.outcome == "unclear" and verdict.why.startswith("no file:line"):
        # a refusal of the whole file (empty, unreadable) names the file only
        if str(p) in verdict.message and (name.startswith("header-only") or name == "no-call"):
            verdict = Verdict("ok", stage="validate", message=verdict.message)
    if v.status == 0 and name not in VALID:
        verdict = Verdict("silent", "validate accepts it", "validate", name)
    out.append(("validate", verdict))
    if v.status != 0:
        return out
    per_call = '"per_call"' in p.read_text(errors="replace")
    for stage, argv in (("run", ["run", str(p), "-s", "append_only", "--json", "-", "-q"]),
                        ("run", ["run", str(p), "-s", "novacode", "--json", "-", "-q"]),
                        *([("fidelity", ["fidelity", str(p), "--json", "-"])] if per_call else [])):
        o = run_cli(argv)
        if o.exception or o.status not in (0, 2):
            out.append((stage, Verdict("traceback", o.exception or o.stderr[-200:], stage, o.stderr[-200:])))
        elif o.status == 2 and stage == "run":
            out.append((stage, Verdict("unclear", "validate accepts, run refuses", stage, o.stderr.strip()[-200:])))
        elif o.status == 2 and str(p) not in o.stderr:
            out.append((stage, Verdict("unclear", "fidelity refusal names no file", stage, o.stderr.strip()[-200:])))
        elif o.status == 0 and absurd_numbers(json_of(o)):
            out.append((stage, Verdict("silent", "impossible number in the result", stage,
                                       ", ".join(absurd_numbers(json_of(o))[:3]))))
        else:
            out.append((stage, Verdict("ok", stage=stage)))
    return out


# the hand-made traces that are valid input (a byte-order mark, Windows line ends); every other
# one must be refused by validate
VALID = {"bom", "crlf"}
# the line a refusal must name, where one line holds the damage
LINE = {"t-infinity": 2, "t-nan": 2, "t-string": 2, "t-iso-string": 2, "t-bool": 2, "deep-input": 3, "huge-digits": 2,
        "bad-utf8-line6": 6, "empty-tool-use-id": 3, "empty-tool-name": 3, "trailing-garbage": 6, "array-line": 6,
        "second-header": 6, "usage-negative": 3, "usage-huge": 3, "usage-float": 3, "usage-string": 3, "usage-bool": 3,
        "t-absurd": 2, "event-model-unknown": 5, "header-name-empty": 1, "header-model-empty": 1}
