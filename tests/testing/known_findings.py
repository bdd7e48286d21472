"""Invariant failures of registered strategies that the property kit found and that are reported to
their owners, not fixed yet. Each is precise (an invariant and a pattern of its one-line detail), so
the kit keeps checking everything else on those strategies; tests/testing/test_registry.py runs each
as a strict xfail, so a fix shows up as an XPASS to remove from this list.

strategy name -> [(invariant, regular expression of the detail, owner, the finding in one line)]
"""

from __future__ import annotations

KNOWN_FINDINGS: dict[str, list[tuple[str, str, str, str]]] = {
    "novacode": [
        # an overflow its own estimate did not see coming, then no reaction (no on_rejected yet)
        ("window", r"was under it\) and it gave up",
         "novacode (#17 item 5; interface 1 of #15)",
         "gives up on an overflow its estimate did not foresee (3.5 characters per token runs 15-20% low on "
         "crash-and-resume chains, several times low on dense text): NovaCode has no on_rejected, so the "
         "session ends there"),
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
    "whole_repo": [
        ("window", r"was under it\) and it gave up",
         "families (#22)",
         "claims manages_window (WindowedStrategy) but has no on_rejected: an overflow its estimate did not "
         "foresee ends the session (rag_memory, structured_state and subagent_isolation share the base)"),
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
