"""The reproduction as text: one row per study for the terminal, docs/validation.md in full, and a
JSON document of the figures (pure functions of the findings)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

from ctxsim.harness.validation.studies import Finding

COLUMNS = (("source", 27), ("published", 40), ("ctxsim", 40), ("agrees", 6))


def terminal(findings: Sequence[Finding], width: int | None = None) -> list[str]:
    """One row per study: source, published figure, ctxsim's, agreement (long cells wrap)."""
    widths = [w for _, w in COLUMNS]
    head = "  ".join(name.ljust(w) for (name, _), w in zip(COLUMNS, widths, strict=True))
    out = [head.rstrip(), "─" * len(head.rstrip())]
    for f in findings:
        cells = [f.published.source, f.published.headline, f.headline, f.agrees]
        wrapped = [textwrap.wrap(c, w) or [""] for c, w in zip(cells, widths, strict=True)]
        for i in range(max(len(x) for x in wrapped)):
            out.append("  ".join((x[i] if i < len(x) else "").ljust(w)
                                 for x, w in zip(wrapped, widths, strict=True)).rstrip())
    return out


def _num(v: float) -> float | None:
    return None if isinstance(v, float) and math.isnan(v) else v


def as_json(findings: Sequence[Finding]) -> list[dict]:
    return [{"source": f.published.key, "published": {"claim": f.published.claim, "citation": f.published.citation,
                                                      "figures": f.published.figures,
                                                      "provenance": f.published.provenance},
             "setup": f.setup, "ctxsim": {"text": f.ctxsim, "figures": {k: _num(v) for k, v in f.figures.items()}},
             "agrees": f.agrees, "rule": f.rule, "reason": f.reason, "difference": f.difference} for f in findings]


DIFFERENCE = {"finding": "a finding (ctxsim says something the study does not)",
              "setup": "the study's setup is not published in enough detail to rebuild",
              "model": "ctxsim does not model what the study's figure rests on"}


def markdown(findings: Sequence[Finding], command: str) -> str:
    """docs/validation.md: the summary table, then each study in full."""
    lines = [
        "# Validation: the field's published results, reproduced",
        "",
        f"Written from the output of `{command}` (deterministic: every session and run is seeded; the same "
        "checkout writes the same file). Each study below: the figure it published, with its citation and how "
        "it was read (P: the primary source; R: computed from the authors' released data; S: a secondary "
        "source only), the setup ctxsim approaches it with, ctxsim's figure, whether they agree by a rule "
        "stated before the numbers, and the reason where they do not. A difference can be a finding.",
        "",
        "| source | published | ctxsim | agrees |",
        "|---|---|---|---|",
        *(f"| {f.published.source} | {f.published.headline} | {f.headline} | {f.agrees} |" for f in findings),
        "",
    ]
    for f in findings:
        p = f.published
        lines += [
            f"## {p.source}",
            "",
            f"**Published** ({p.provenance}). {p.claim}.",
            "",
            f"*Citation*: {p.citation}.",
            "",
        ]
        if p.not_found:
            lines += [f"*Not found in the source*: {p.not_found}.", ""]
        lines += [
            f"**Setup in ctxsim.** {f.setup}",
            "",
            f"**ctxsim.** {f.ctxsim}.",
            "",
            f"**Agrees: {f.agrees}** (rule: {f.rule}).",
            "",
        ]
        if f.reason:
            kind = f" *Difference: {DIFFERENCE[f.difference]}.*" if f.difference else ""
            lines += [f"**Why.** {f.reason}{kind}", ""]
        if f.details:
            lines += [*f.details, ""]
    return "\n".join(lines).rstrip() + "\n"
