"""What each study published: the figure ``ctxsim reproduce`` compares with, its citation, and how it
was read.

Provenance tags, as the research notes kept them: **P** read in the primary source (the paper, the
vendor's page, the authors' code), **R** computed from the authors' released data (not printed by
them), **S** a secondary source only (a summary quoting the paper; not verified against it).
What could not be found is said so (``not_found``), never filled in.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Published:
    key: str
    source: str                     # short name, the row's label
    headline: str                   # the figure in a few words (the table's column)
    citation: str
    claim: str                      # the figure as published (quoted where the words matter)
    figures: dict[str, float] = field(default_factory=dict)   # the numbers compared, by name
    provenance: str = "P"
    not_found: str = ""             # what the source does not say that a setup would need


COMPLEXITY_TRAP = Published(
    key="complexity_trap",
    headline="masking -52.7% vs raw; hybrid -7% / -11% vs masking / summary",
    source="Complexity Trap (JetBrains)",
    citation=("Lindenbauer, Slinko, Felder, Bogomolov, Zharov, \"The Complexity Trap: Simple Observation Masking "
              "Is as Efficient as LLM Summarization for Agent Context Management\", arXiv:2508.21433 (v3, DL4C "
              "@ NeurIPS 2025); code JetBrains-Research/the-complexity-trap bf15b5f; data auxiliary-data/ "
              "(bootstrapped_cis.csv, experiment_instance_costs_sweagent.csv; read in the fork "
              "Recursive-Safeguarding/the-complexity-trap at 1b07dec)"),
    claim=("\"a simple environment Observation Masking strategy halves cost relative to the Raw Agent while "
           "matching ... the solve rate of LLM-Summary\"; the hybrid \"further reduces costs by 7% and 11% "
           "compared to just Observation Masking or LLM-Summary\" (abstract, P). Qwen3-Coder 480B on SWE-bench "
           "Verified: raw $1.288, masking (M=10) $0.610 (-52.7%), LLM-Summary (N=21, M=10) $0.637 (-50.6%) (R, "
           "bootstrapped_cis.csv); masking -9.9% to -57.3% over the five model configurations (R); the hybrid "
           "(N=43, M=10, mask W=10, 50 instances, $0.571 with its checkpoint calls) -6.3% / -10.2% against the full "
           "500-instance masking and summary runs (the published 7% / 11%) and -10.3% / -23.9% against them on the "
           "same 50 instances (R, experiment_instance_costs_sweagent.csv, cost + summary_cost); checkpoint calls "
           "7.4% of the summary arm's cost; mean prompt tokens per call raw 22,767, masking 10,904; mean turns raw "
           "58.5 (R)"),
    figures={"masking_vs_raw": -0.527, "summary_vs_raw": -0.506, "hybrid_vs_masking": -0.07,
             "hybrid_vs_summary": -0.11, "hybrid_vs_masking_same50": -0.103, "hybrid_vs_summary_same50": -0.239,
             "summary_cost_share": 0.074, "raw_mean_prompt_tokens": 22_800, "masking_mean_prompt_tokens": 10_900},
    provenance="P (abstract, configs) and R (the released per-run and per-instance costs)",
    not_found="the paper's body (tables, Figure 1) was not readable; Gemini prices; which hybrid run the 7%/11% "
              "quote (the N=43 run gives them)",
)

OPENHANDS_CONDENSER = Published(
    key="openhands_condenser",
    headline="cost per turn settles under half (up to 2x lower)",
    source="OpenHands condenser",
    citation=("Calvin Smith, \"OpenHands Context Condensensation for More Efficient AI Agents\", openhands.dev "
              "blog, 9 April 2025; condenser defaults: All-Hands-AI/OpenHands condenser_config.py, "
              "OpenHands/software-agent-sdk v1.43.1"),
    claim=("\"Up to 2x per-turn API cost reduction\"; \"the average cost per-turn starts diverging from the "
           "baseline until it settles into less than half the cost\"; solve rate 54% against 53%"),
    figures={"per_turn_cost_ratio": 2.0},
    not_found="the model, the subset's size and the condenser's max_size / keep_first used for the figure",
)

CONTEXT_EDITING = Published(
    key="context_editing",
    headline="-84% tokens in a 100-turn search task",
    source="Anthropic context editing",
    citation=("Anthropic, \"Managing context on the Claude Developer Platform\", 29 September 2025 "
              "(claude.com/blog/context-management)"),
    claim=("\"In a 100-turn web search evaluation, context editing enabled agents to complete workflows that "
           "would otherwise fail due to context exhaustion—while reducing token consumption by 84%\""),
    figures={"token_reduction": -0.84},
    not_found="the model (Sonnet 4.5 implied), the clearing parameters, the page sizes, and what the 84% is "
              "counted against (the baseline fails)",
)

PNNL_CONDENSERS = Published(
    key="pnnl_condensers",
    headline="LLM condensers +24-94% tokens; masking -8.6%",
    source="PNNL condensers",
    citation=("Chintalapati, Raskar, Acharya, Willard, Emami, Horawalavithana, \"Evaluating Memory Condensation "
              "Strategies for Coding Agents in Data-Driven Scientific Discovery\", arXiv:2605.18854 (13 May 2026)"),
    claim=("8 condensers, GPT-4o, 60 DiscoveryBench tasks (480 evaluations): \"no condenser significantly alters "
           "hypothesis quality, while LLM-based condensers increase token costs by 24-94 percent, and masking "
           "tool-call outputs achieves an 8.6 percent net savings\" (abstract; \"token costs\" read here as tokens)"),
    figures={"llm_tokens_low": 0.24, "llm_tokens_high": 0.94, "masking_tokens": -0.086},
    not_found="the per-condenser table, the condensers' parameters, the OpenHands version and the task lengths "
              "(only the first page was readable)",
)

ACE_COLLAPSE = Published(
    key="ace_collapse",
    headline="18,282 -> 122 tokens in one rewrite",
    source="ACE context collapse",
    citation=("Zhang et al., \"Agentic Context Engineering: Evolving Contexts for Self-Improving Language "
              "Models\", arXiv:2510.04618 (ICLR 2026)"),
    claim=("monolithic rewriting on AppWorld: \"at step 60 the context contained 18,282 tokens and achieved an "
           "accuracy of 66.7, but at the very next step it collapsed to just 122 tokens, with accuracy dropping "
           "to 57.1—worse than the baseline accuracy of 63.7\""),
    figures={"tokens_before": 18_282, "tokens_after": 122, "accuracy_before": 66.7, "accuracy_after": 57.1},
    provenance="S (quoted verbatim by two notes that checked the paper; the primary was not read here)",
    not_found="the figure's number and the model of the case",
)

MANUS = Published(
    key="manus_cache",
    headline="input:output ~100:1; cached input 10x cheaper",
    source="Manus cache hit / 100:1",
    citation=("Yichao \"Peak\" Ji, \"Context Engineering for AI Agents: Lessons from Building Manus\", "
              "manus.im blog, 18 July 2025"),
    claim=("\"the KV-cache hit rate is the single most important metric for a production-stage AI agent\"; "
           "\"the average input-to-output token ratio is around 100:1\"; with Claude Sonnet \"cached input "
           "tokens cost 0.30 USD/MTok, while uncached ones cost 3 USD/MTok—a 10x difference\""),
    figures={"input_output_ratio": 100.0, "cached_price": 0.30, "uncached_price": 3.00},
)

ALL = (COMPLEXITY_TRAP, OPENHANDS_CONDENSER, CONTEXT_EDITING, PNNL_CONDENSERS, ACE_COLLAPSE, MANUS)
