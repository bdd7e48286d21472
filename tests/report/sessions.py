"""A hand-built long session for the report tests: three user turns; in the second, one tool
result of about 500,000 tokens (a log dump) that no strategy without a spill or a truncation can
send in a 200,000-token window. Strategies that keep it fail there, after spending less than the
ones that complete the whole session (so ranking by cost would put a failure first)."""

from __future__ import annotations

from ctxsim.harness.model import trace as tr

from tests.helpers_traces import Builder

WINDOW = 200_000
DUMP_AT = 15  # main call whose request first holds the dump


def dump_session() -> tr.Trace:
    b = Builder().user("make the importer stream its input; ticket IMP-7731")
    b.event(tr.FactEvent(t=b.t, id="goal", category="goal", text="IMP-7731"))
    for i in range(30):
        if i == 10:
            b.user("now run it on the production log")
        if i == DUMP_AT - 1:
            b.call("dump the log", ["log line\n" * 250_000])
            continue
        if i == 20:
            b.user("and write the summary to NOTES.md")
        if i % 5 == 2:
            b.event(tr.ProbeEvent(t=b.t, id=f"p{i}", needs=["goal"]))
        b.call(f"step {i}", [f"output {i}\n" + "def handler(event):\n    return event\n" * 200])
    return b.call("done").build()
