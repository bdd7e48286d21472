"""Invariant failures of registered strategies that the property kit found and that are reported to
their owners, not fixed yet. Each is precise (an invariant and a pattern of its one-line detail), so
the kit keeps checking everything else on those strategies; tests/testing/test_registry.py runs each
as a strict xfail, so a fix shows up as an XPASS to remove from this list.

strategy name -> [(invariant, regular expression of the detail, owner, the finding in one line)]
"""

from __future__ import annotations

KNOWN_FINDINGS: dict[str, list[tuple[str, str, str, str]]] = {
    "novacode": [
        # only overflows its own estimate did not see coming (an estimate under the window): one it saw is a defect
        ("window", r"tokens > window 32,000 \(the strategy estimated (?:[12]?\d),\d{3}\)$",
         "novacode (#17, item 5)",
         "on long crash-and-resume chains the request passes the window while the strategy's estimate (3.5 "
         "characters per token from an empty anchor after each resume) is 15-20% low and under the hard line"),
        ("api", r"^thinking stripped from the open tool loop",
         "novacode (#17)",
         "after a crash and resume (N-TRANS-5) the transcript's history has no thinking (N-TRANS-3), but the "
         "resumed request continues the open tool loop, whose assistant turn must start with its thinking "
         "block when thinking is on (a 400 on the real API)"),
    ],
    "codex": [
        ("api", r"^the first message is the assistant's",
         "peers (#18)",
         "the drop-oldest retry of a too-long compaction call sends a summary request that starts with an "
         "assistant message (Bedrock and Vertex refuse it)"),
    ],
    "tiered_budget": [
        ("no_respill", r"reads back spilled file",
         "families (#22)",
         "a read-back is recognised only by an absolute path (Path(v).resolve() against the process's working "
         "directory): the model's relative tool-results/<id>.txt read is cut again"),
    ],
}


def known_for(name: str) -> tuple[tuple[str, str], ...]:
    """(invariant, pattern) pairs for find_failure(known=...)."""
    return tuple((inv, rx) for inv, rx, _owner, _line in KNOWN_FINDINGS.get(name, ()))
