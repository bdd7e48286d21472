"""A history set again unchanged is no rewrite (strategies/templates.py set_history)."""

from __future__ import annotations

from ctxsim.harness.model.conversation import History, Message, Usage

from tests.strategies.peer_env import make


def test_a_history_set_again_unchanged_is_no_rewrite_and_keeps_its_anchor():
    """gemini-cli splits at its own snapshot in a long tool loop: the compressed history is the one it replaces.
    Nothing sent changes, so no rewrite is declared (the kit's false_rewrite found it declared on every request of
    a loop) and the usage anchor stands; a history that differs is a rewrite."""
    s = make("gemini_cli")
    s.on_user(Message.user("task"))
    s.on_response(Message("assistant", ()), Usage(input_uncached=1_000, output=1))
    before = s.anchor.anchor
    s.rewrote = False
    s.set_history(History(list(s.history)))
    assert not s.rewrote and s.anchor.anchor == before
    s.set_history(History([Message.user("summary", origin="summary")]))
    assert s.rewrote
