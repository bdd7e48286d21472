"""Strategies as users write their variants: a subclass under another class name and ``name``, its
code unchanged (issue #45: the kit looked NovaCode's scaled parameters up by ``name``, so such a
variant ran the 200k defaults in the kit's 32k window and failed). Each must pass whatever the
base passes; they are the twins of the issue-45 mutants that build on them."""

from __future__ import annotations

from ctxsim.strategies.codex import Codex
from ctxsim.strategies.context_editing import ContextEditing
from ctxsim.strategies.cut_no_summary import CutNoSummary
from ctxsim.strategies.novacode.strategy import NovaCode


class MyNovaCode(NovaCode):
    name = "my_novacode"


class TeamConfig(NovaCode.Config):
    tail_min_messages: int = 6  # one more than the spec's 5: the kit scales the subclass's own defaults


class TeamNovaCode(NovaCode):
    """Another name and a Config of its own."""

    name = "team_nova"
    Config = TeamConfig


class ClearingAssistant(ContextEditing):
    name = "clearing_assistant"


class MyCutNoSummary(CutNoSummary):
    name = "my_cut"


class MyCodex(Codex):
    name = "my_codex"


def _ce_params(**extra):
    def check_params(window: int) -> dict:
        return {**ContextEditing.check_params(window), **extra}
    return staticmethod(check_params)


class ClearingInSteps(ClearingAssistant):
    """context_editing run with the per-clearing reading of clear_at_least."""

    check_params = _ce_params(clear_at_least_scope="per_clearing")


class ClearingThinking(ClearingAssistant):
    """context_editing with clear_thinking_20251015 keeping the last turn's thinking."""

    check_params = _ce_params(clear_thinking=True, keep_thinking_turns=1)


class ClearingEpisodic(ClearingAssistant):
    """context_editing in its older episodic reading."""

    check_params = _ce_params(mode="episodic")


class ClearingInputsOfReads(ClearingAssistant):
    """context_editing clearing the inputs of the cleared Read and Bash uses (clear_tool_inputs as a list)."""

    check_params = _ce_params(clear_tool_inputs=("Read", "Bash"))
