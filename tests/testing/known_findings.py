"""Invariant failures of registered strategies that the property kit found and that are reported to
their owners, not fixed yet. Each is precise (an invariant and a pattern of its one-line detail), so
the kit keeps checking everything else on those strategies; tests/testing/test_registry.py runs each
as an xfail naming its owner, so a fix shows up as an XPASS to remove from this list (not strict:
which sessions reach a finding moves with the generators, and a finding not reached is no fix).

strategy name -> [(invariant, regular expression of the detail, owner, the finding in one line)]
"""

from __future__ import annotations

KNOWN_FINDINGS: dict[str, list[tuple[str, str, str, str]]] = {
    "novacode": [
        ("window", r"and it gave up \(on_rejected returned False\).*; (its summary request was refused as too long|"
                   r"after a summary made in its reaction)$",
         "novacode (#17)",
         "one step's results (each under the spill threshold, together under the aggregate budget) push the "
         "request past the window, and the forced compaction cannot bring it back: its summary request is the "
         "whole conversation, refused as too long (summary_input_fit is off by default), or the summary comes "
         "back but the verbatim tail (N-COMP-7) alone is over the window, so nothing shrinks (no_shrink); it "
         "gives up and the session ends"),
        ("window", r"it sent a request it knew was too long",
         "novacode (#17)",
         "the same case one step earlier: the hard line's compaction does not shrink the request (the verbatim "
         "tail is over the window, no_shrink), and the request its own estimate puts over the window is sent "
         "anyway (N-COMP-3 promises the hard line holds)"),
    ],
    "openhands": [
        ("estimate", r"^the strategy estimated",
         "peers (#18)",
         "after a condensation the re-based estimate (the old total minus the dropped events at 4 characters "
         "per token) runs 60-80% high until the next usage"),
    ],
    "whole_repo": [
        ("window", r"was under it\) and it gave up",
         "families (#22)",
         "claims manages_window (WindowedStrategy) but gives up on an overflow its estimate did not foresee "
         "(text dense in tokens): the session ends there"),
    ],
}


def known_for(name: str) -> tuple[tuple[str, str], ...]:
    """(invariant, pattern) pairs for find_failure(known=...)."""
    return tuple((inv, rx) for inv, rx, _owner, _line in KNOWN_FINDINGS.get(name, ()))
