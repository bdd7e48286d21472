"""Invariant failures of registered strategies that the property kit found and that are reported to
their owners, not fixed yet. Each is precise (an invariant and a pattern of its one-line detail), so
the kit keeps checking everything else on those strategies: ``ctxsim check-strategy NAME`` reports a
known finding it meets as known (with its owner) and does not fail on it; tests/testing/test_registry.py
runs each as an xfail naming its owner, so a fix shows up as an XPASS to remove from this list (not
strict: which sessions reach a finding moves with the generators, and a finding not reached is no fix).

strategy name -> [(invariant, regular expression of the detail, owner, the finding in one line)]
"""

from __future__ import annotations

KNOWN_FINDINGS: dict[str, list[tuple[str, str, str, str]]] = {
    "tiered_budget": [
        ("no_respill", r"reads back spilled file .*tool-results/toolu_\d+\.txt but entered the window replaced",
         "families (#22)",
         "a Read of its own tool-results/<id>.txt (absolute path, offset 0, limit 27,700) beside four small Reads "
         "entered cut to 6,926 chars (N-SPILL-3): strategies/tiered_budget.py is_readback/apply did not exempt it; "
         "found by `ctxsim check-strategy tiered_budget --profile default` on the corpus (seed 29, session 31 of "
         "the clock-edge draws, shrunk to 20 events), #29"),
    ],
    "whole_repo": [
        ("window", r"was under it\) and it gave up",
         "families (#22)",
         "claims manages_window (WindowedStrategy) but gives up on an overflow its estimate did not foresee "
         "(text dense in tokens): the session ends there"),
    ],
}


def known_base(cls: type) -> str:
    """The registered strategy ``cls`` is or derives from (the nearest in its method resolution order), or
    ``""``: its known findings are ``cls``'s too, since a subclass runs the code they are in (a user's
    variant of tiered_budget failed its base's known no_respill finding, blind set 16 of issue #45)."""
    from ctxsim.strategies import registry

    names = set(registry.names())
    for k in cls.__mro__:
        n = getattr(k, "name", "")
        if n and n in names and registry.get(n) is k:
            return n
    return ""


def known_for(name: str) -> tuple[tuple[str, str], ...]:
    """(invariant, pattern) pairs for find_failure(known=...)."""
    return tuple((inv, rx) for inv, rx, _owner, _line in KNOWN_FINDINGS.get(name, ()))


def owner_of(name: str, invariant: str, detail: str) -> str | None:
    """The owner of the known finding ``detail`` is, or None."""
    import re

    for inv, rx, owner, _line in KNOWN_FINDINGS.get(name, ()):
        if inv == invariant and re.search(rx, detail):
            return owner
    return None
