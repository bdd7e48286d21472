"""whole_repo: the whole repository goes into the context up front (spec/novacode.md section 8:
"putting the whole repository in context").

Model. At the start of each session the agent sends a snapshot of the repository as the first user
message (one text block per file, ``<file path=...>`` tags), pinned there for the whole session and
cached behind its own breakpoint; the conversation follows and is windowed when the request nears
the window (oldest messages dropped on pair-safe boundaries, no summary). The snapshot is real text:
the files of the simulated project directory (the trace's ``header.meta.files``, seeded by the
engine under ``env.project_dir``) first, then deterministic code-like modules synthesised from
``env.rng`` until the snapshot reaches ``repo_tokens`` (estimated at ``chars_per_token``; the engine
counts the true tokens). A snapshot larger than ``max_repo_share`` of the usable window is cut, whole
files dropped from the end, and the cut is counted (``repo_files_dropped``).

Why it rarely works, and how the run shows it: every call carries the repository, so cost is paid
on ``repo_tokens`` per call (cache reads at 0.1x while the cache is warm, a full 1.25x re-write after
every gap longer than the 5-minute TTL); the conversation gets only what the repository leaves of
the window, so it is cut sooner and more often; and attention is diluted: the retention model scores
a fact lower the longer the context it sits in ("Context Rot", "Lost in the Middle"), so the same
facts score worse next to a large snapshot. Source of the idea: the "stuff the repo in the prompt"
approach of long-context coding tools (e.g. repomix / gitingest-style repository packing), which
the seed names as an alternative it rejects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from harness.conversation import Block, Message
from strategies.base import StrategyEnv
from strategies.structured_state import WindowedConfig, WindowedStrategy

# Word lists of the synthesised code (any deterministic vocabulary would do; these read like a
# backend service's modules).
_PKGS = ("api", "core", "storage", "jobs", "auth", "billing", "search", "util", "export", "sync")
_NOUNS = ("user", "order", "session", "token", "record", "batch", "report", "tenant", "cache", "queue",
          "upload", "invoice", "event", "metric", "config", "schema", "index", "worker", "lease", "chunk")
_VERBS = ("load", "save", "parse", "build", "check", "merge", "split", "flush", "fetch", "render",
          "resolve", "apply", "encode", "decode", "retry", "prune", "sync", "emit", "scan", "lock")
_TYPES = ("int", "str", "bytes", "float", "bool", "dict[str, Any]", "list[str]", "None")


class WholeRepoConfig(WindowedConfig):
    repo_tokens: int = Field(100_000, ge=0, le=5_000_000,
                             description="size of the repository snapshot put in context, in estimated tokens")
    source: Literal["project", "synthetic"] = Field(
        "project", description="project: the simulated project's real files first, synthesised modules fill "
        "the rest; synthetic: synthesised modules only")
    max_repo_share: float = Field(0.8, gt=0, le=1,
                                  description="the snapshot may take at most this share of window - reserve_tokens; "
                                  "files beyond it are dropped")
    trigger_tokens: int = Field(2_000_000, ge=1_000, le=2_000_000,
                                description="cut the conversation when the estimated request reaches this "
                                "(default: as late as the window allows, window - reserve_tokens)")
    keep_tokens: int = Field(40_000, ge=0, le=2_000_000,
                             description="conversation tokens kept verbatim after a cut")


def _function(rng: np.random.Generator) -> str:
    pick = lambda xs: xs[int(rng.integers(len(xs)))]  # noqa: E731
    verb, noun, other = pick(_VERBS), pick(_NOUNS), pick(_NOUNS)
    args = [f"{pick(_NOUNS)}_{i}: {pick(_TYPES)}" for i in range(int(rng.integers(1, 4)))]
    ret = pick(_TYPES)
    lines = [f"def {verb}_{noun}({', '.join(args)}) -> {ret}:",
             f'    """{verb.capitalize()} the {noun} for the given {other}; raises {noun.capitalize()}Error '
             f'when the {other} is stale."""']
    for _ in range(int(rng.integers(3, 12))):
        k = int(rng.integers(5))
        a, b = pick(_NOUNS), pick(_NOUNS)
        if k == 0:
            lines.append(f"    if {a}_count > {int(rng.integers(2, 5000))}:")
            lines.append(f"        raise {a.capitalize()}Error(f\"too many {a}s for {{{b}_id}}\")")
        elif k == 1:
            lines.append(f"    for {a} in {b}_index.get({a}_key, []):")
            lines.append(f"        {pick(_VERBS)}_{a}({a}, retries={int(rng.integers(1, 9))})")
        elif k == 2:
            lines.append(f"    {a}_map = {{k: v for k, v in {b}_rows.items() if v is not None}}")
        elif k == 3:
            lines.append(f"    log.debug(\"{verb} {noun}: %s {a}s in %.2f ms\", len({a}_map), elapsed_ms)")
        else:
            lines.append(f"    {a}_total += {pick(_VERBS)}_{b}({a}_id, timeout_s={int(rng.integers(1, 60))})")
    lines.append(f"    return {pick(_VERBS)}_{noun}_result")
    return "\n".join(lines)


def synthesise_module(rng: np.random.Generator) -> tuple[str, str]:
    """One code-like module (path, text), deterministic in ``rng``."""
    pkg, mod = _PKGS[int(rng.integers(len(_PKGS)))], _NOUNS[int(rng.integers(len(_NOUNS)))]
    path = f"src/{pkg}/{mod}_{int(rng.integers(1000)):03d}.py"
    head = [f'"""{mod.capitalize()} handling for the {pkg} package."""', "", "from __future__ import annotations",
            "", "import logging", "from typing import Any", "", "log = logging.getLogger(__name__)", ""]
    body = [_function(rng) for _ in range(int(rng.integers(3, 10)))]
    return path, "\n".join(head) + "\n\n" + "\n\n\n".join(body) + "\n"


def project_files(root: Path | None) -> list[tuple[str, str]]:
    """The simulated project's text files (relative path, text), in path order."""
    if root is None or not Path(root).is_dir():
        return []
    out = []
    for p in sorted(Path(root).rglob("*")):
        if p.is_file():
            try:
                out.append((str(p.relative_to(root)), p.read_text(encoding="utf-8")))
            except (UnicodeDecodeError, OSError):
                continue
    return out


def file_block(path: str, text: str) -> str:
    return f'<file path="{path}">\n{text}\n</file>'


class WholeRepo(WindowedStrategy):
    """The repository pinned at the top of every session, the conversation windowed after it."""

    name = "whole_repo"
    summary = "whole repository in context up front; conversation windowed behind it"
    Config = WholeRepoConfig
    SCALED = (*WindowedStrategy.SCALED, "repo_tokens")

    def __init__(self, config: WholeRepoConfig, env: StrategyEnv) -> None:
        self.files: list[tuple[str, str]] | None = None  # built once, at the first session head
        super().__init__(config, env)

    def _snapshot_files(self, config: WholeRepoConfig, env: StrategyEnv) -> list[tuple[str, str]]:
        budget_chars = int(config.repo_tokens * config.chars_per_token)
        cap_chars = int(config.max_repo_share * max(0, env.window - config.reserve_tokens) * config.chars_per_token)
        files: list[tuple[str, str]] = []
        chars = 0
        if config.source == "project":
            for path, text in project_files(env.project_dir):
                if chars >= budget_chars:
                    break
                files.append((path, text))
                chars += len(file_block(path, text))
        seen = {p for p, _ in files}
        while chars < budget_chars:
            path, text = synthesise_module(env.rng)
            if path in seen:
                continue
            seen.add(path)
            if chars + len(file_block(path, text)) > budget_chars:  # last file: cut to the size asked
                room = budget_chars - chars - len(file_block(path, ""))
                if room <= 0:
                    break
                text = text[:room]
            files.append((path, text))
            chars += len(file_block(path, text))
        kept, total = [], 0
        for path, text in files:
            n = len(file_block(path, text))
            if total + n > cap_chars:
                self.counters.extra["repo_files_dropped"] += 1
                continue
            kept.append((path, text))
            total += n
        self.counters.extra["repo_files"] = len(kept)
        self.counters.extra["repo_chars"] = total
        return kept

    def session_head(self, resume: bool) -> list[Message]:
        if self.files is None:
            self.files = self._snapshot_files(self.config, self.env)
        if not self.files:
            return []
        root = self.env.project_dir or "."
        blocks = [Block.text_block(f"<repository root=\"{root}\">\nThe whole repository follows, one file per block.")]
        blocks += [Block.text_block(file_block(p, t)) for p, t in self.files]
        blocks.append(Block.text_block("</repository>"))
        return [Message("user", tuple(blocks), {"origin": "repository"})]
