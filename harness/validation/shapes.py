"""The synthetic sessions each study's setup is approached with: ``ctxsim synth`` presets with
``--set`` overrides (:func:`ctxsim.harness.synth.load_preset`), each override with its reason.

Everything not overridden is the generator's default, fitted to real Claude Code, Codex and SWE-agent
logs (sizes, tool mix, gaps; traces/README.md). The shapes change only what makes a study's sessions
what they are: one task worked through in one user turn, one tool call per model call (SWE-agent and
OpenHands CodeAct act once per step), and the length.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxsim.harness.model.trace import Trace

# one task, one user turn, one action per step: an agent benchmark episode (SWE-bench, DiscoveryBench)
ONE_TASK = ("parallel={ \"1\" = 1.0 }",            # one tool call per model call (SWE-agent, CodeAct)
            "calls_per_turn.median=1000", "calls_per_turn.p90=1000", "calls_per_turn.lo=1",
            "calls_per_turn.hi=2000",               # the whole episode is one user turn
            "new_task_share=0.0")                   # the benchmark gives one task; no next bug is reported
# 100 turns of web research: half the steps fetch a page (the corpus's documentation pages), half read
# a file, 30% of those reads large (50,000 characters and up): assumed, so that the whole history passes
# the 200k window before the 100th turn (the study's baseline "would otherwise fail due to context
# exhaustion"); the study's page sizes are not published
WEB_RESEARCH = ("tool_mix={ web = 0.5, read = 0.5 }", "huge_share=0.3")


@dataclass(frozen=True)
class Shape:
    """A family of synthetic sessions: a preset, its overrides, the lengths and seeds drawn."""

    label: str
    preset: str
    overrides: tuple[str, ...]
    lengths: tuple[int, ...]
    seeds: tuple[int, ...]

    def describe(self) -> str:
        n = len(self.lengths) * len(self.seeds)
        lengths = ", ".join(str(x) for x in self.lengths)
        seeds = ", ".join(str(s) for s in self.seeds)
        return (f"{n} synthetic sessions (`ctxsim synth {self.preset}` with {' '.join(f'--set {o!r}' for o in self.overrides)}; "
                f"calls {lengths}; seeds {seeds})")

    def traces(self) -> list[tuple[int, int, Trace]]:
        """(length, seed, trace) for every length and seed, generated in this order (deterministic)."""
        from ctxsim.harness.synth import generate, load_preset

        out = []
        for n in self.lengths:
            cfg = load_preset(self.preset, [f"calls={n}", *self.overrides])
            for s in self.seeds:
                out.append((n, s, generate(cfg, seed=s)))
        return out


def swe_episodes(fast: bool) -> Shape:
    """SWE-bench episodes as The Complexity Trap ran them: mean 58.5 turns for the raw Qwen3-Coder agent
    (released data; 250 at most), here lengths 20-100 (mean 60)."""
    return Shape("swe", "short", ONE_TASK, (40, 80) if fast else (20, 40, 60, 80, 100), (1,) if fast else (1, 2))


def long_episodes(fast: bool) -> Shape:
    """Long single-task sessions, where the OpenHands write-up shows per-turn cost diverging."""
    return Shape("long", "short", ONE_TASK, (120,) if fast else (200,), (1,) if fast else (1, 2, 3))


def web_research(fast: bool) -> Shape:
    """The 100-turn web search evaluation of the context editing announcement."""
    return Shape("web", "short", (*ONE_TASK, *WEB_RESEARCH), (100,), (1,) if fast else (1, 2, 3, 4, 5))


def discovery_tasks(fast: bool) -> Shape:
    """DiscoveryBench tasks run by an OpenHands agent (task lengths not published: 30-120 calls assumed)."""
    return Shape("discovery", "short", ONE_TASK, (60, 120) if fast else (30, 60, 90, 120), (1,) if fast else (1, 2))
