"""append_only: history only grows. The seed's naive baseline ("more is better"): every message
enters history as it is and stays there; no spill, no compaction, no cache breakpoints. On a long
session it overflows the window; at its first rejected request it gives up (the default reaction),
so the run fails there."""

from __future__ import annotations

from ctxsim.strategies.base import Strategy, StrategyConfig
from pydantic import Field


class AppendOnlyConfig(StrategyConfig):
    cache_breakpoints: bool = Field(
        False, description="place one breakpoint on the last message (what a naive agent that "
        "still turns caching on would do); off: the seed's baseline as stated")


class AppendOnly(Strategy):
    name = "append_only"
    summary = "history only grows; overflows on long sessions (seed baseline)"
    on_rejection = ("the turn errors and the session ends (no agent runs this: the seed's naive baseline; real agents "
                    "never keep sending a rejected request, peers.md)")
    Config = AppendOnlyConfig

    @classmethod
    def cache_marks(cls, config) -> tuple[str, ...]:
        return ("system", "last") if config.cache_breakpoints else ()

    def breakpoints(self, history):
        from ctxsim.harness.model.conversation import Breakpoint

        if self.config.cache_breakpoints and len(history):
            return (Breakpoint("system"), Breakpoint(len(history) - 1))
        return ()
