"""The task message of a benchmark harness, split around the issue statement it wraps.

SWE-agent and OpenHands wrap the issue in a template of their own (where the repository is, how to
work, tips). A derivation takes the goal from the first line of the user's first request; on the
whole message that line is the template's ("We're currently solving the following issue…"). Split
into head, issue and tail — texts that concatenate to the original, nothing lost — with the head
and tail marked ``meta.origin = "task_template"`` (the harness wrote them, not the user), the
issue is the request and its first line the goal.
"""

from __future__ import annotations

from typing import Any

TEMPLATE = "task_template"
# (start, end) around the issue in each harness's instance template:
# SWE-agent 0.x / early 1.x ``ISSUE:`` … ``INSTRUCTIONS:`` (both bundled .traj files);
# SWE-agent 1.x config/default.yaml ``<pr_description>`` (reported; Anthropic's SWE-bench prompt has it too);
# OpenHands evaluation/benchmarks/swe_bench/run_infer.py ``<issue_description>`` (reported)
ISSUE_MARKERS = (("ISSUE:\n", "\n\nINSTRUCTIONS:"), ("<pr_description>\n", "\n</pr_description>"),
                 ("<issue_description>\n", "\n</issue_description>"))


def task_parts(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The task message as (text, meta) parts: template head, issue statement, template tail. Their
    texts concatenate to ``text``; without a known marker the message is one part, the request."""
    for start, end in ISSUE_MARKERS:
        i = text.find(start)
        if i < 0:
            continue
        a = i + len(start)
        j = text.find(end, a)
        j = len(text) if j < 0 else j
        if not text[a:j].strip():
            continue
        parts = [(text[:a], {"origin": TEMPLATE}), (text[a:j], {"issue": True}), (text[j:], {"origin": TEMPLATE})]
        return [(t, m) for t, m in parts if t]
    return [(text, {})]
