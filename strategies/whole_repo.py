"""whole_repo: the whole repository goes into the context up front (spec/novacode.md section 8:
"putting the whole repository in context", the anti-pattern the seed rejects).

Practitioner: repository packing for long-context models (repomix / gitingest: every text file of
the repository in one prompt, one ``<file path=...>`` block each), the thing Aider's repo map
(``aider/repomap.py``: a ranked map of 1,024 tokens, peers.md) exists to avoid.

The repository is real, and known to the strategy only as the agent would know it:

1. the files of the simulated project directory (the trace's ``header.meta.files``, seeded by the
   engine under ``env.project_dir``), as on disk when the session starts;
2. the files the agent reads during the session (results of ``read_tools``, ``cat -n`` line numbers
   stripped): the trace's own project, as far as it shows it. They make the snapshot at the next
   session start, newest first (over the budget the oldest go), and at the first compaction that
   finds the snapshot still a corpus (a whole-repository agent does not re-send its repository
   otherwise), so on an imported log the snapshot becomes the project's own code;
3. when the project has no known file yet (a log's first calls, a trace with no project files), a
   documented real corpus: the Python sources of an installed package pinned in pyproject.toml
   (``corpus``, default ``rich``: rich==15.0.0, 100 files, 1.22 MB), files in path order.

Size: ``repo_tokens`` (estimated tokens) defaults to the whole repository as found — its own size is
the sourced figure — and is capped at ``max_repo_share`` of window − reserve (assumed 0.5: a sweep
varies it), whole files dropped from the end and counted (``repo_files_dropped``).

The snapshot is the first user message, pinned, behind its own cache breakpoint; the conversation
behind it is compacted as NovaCode does (N-COMP-1/2's soft line, a billed summary, a N-COMP-6 tail,
never more than what the repository leaves), and a request the API rejects as too long is compacted
at once and retried (Claude Code's reactive compaction, reported).

Why it rarely works, and how the run shows it: every call carries the repository (cache reads at
0.1× while warm, a full re-write after every gap longer than the TTL and at every re-pack); the
conversation gets only what the repository leaves of the window, so it is compacted sooner and more
often; and attention is diluted: the retention model scores a fact lower the longer the context it
sits in ("Context Rot", "Lost in the Middle").
"""

from __future__ import annotations

import importlib.util
import os
import re
import stat
from pathlib import Path

from ctxsim.harness.model.conversation import Block, History, Message
from ctxsim.strategies.base import StrategyEnv
from ctxsim.strategies.structured_state import WindowedConfig, WindowedStrategy, split_names
from pydantic import Field, field_validator

READ_TOOLS = ("Read", "read_file", "view", "open_file")  # Claude Code, Codex/SWE-agent, OpenHands
PATH_KEYS = ("file_path", "path", "filename", "file")
CORPUS = "rich"  # pinned in pyproject.toml (rich==15.0.0): 100 real Python modules, 1.22 MB
_NUMBERED = re.compile(r"^ *\d+\t", re.M)  # `cat -n` prefixes, as Claude Code's Read returns lines


class WholeRepoConfig(WindowedConfig):
    repo_tokens: int | None = Field(None, ge=0, le=10_000_000,
                                    description="size of the snapshot in estimated tokens (default: the whole "
                                    "repository as found), capped by max_repo_share")
    max_repo_share: float = Field(0.5, gt=0, le=0.9,
                                  description="the snapshot takes at most this share of window - reserve_tokens "
                                  "(assumed); files beyond it are dropped")
    learn_reads: bool = Field(True, description="files the agent reads join the snapshot at the next re-pack")
    read_tools: tuple[str, ...] = Field(READ_TOOLS, min_length=1, description="tools whose results are file contents")
    corpus: str = Field(CORPUS, min_length=1, max_length=500,
                        description="the real corpus used while the project has no known file: an installed "
                        "package's name (its .py sources) or a directory")

    @field_validator("read_tools", mode="before")
    @classmethod
    def _names(cls, v):
        return split_names(v)

    @field_validator("corpus")
    @classmethod
    def _not_the_machine(cls, v: str) -> str:
        fs = pseudo_fs(v) if os.path.isabs(v) or os.sep in v or v.startswith(".") else None
        if fs:
            raise ValueError(f"{v!r} is the machine's {fs} file system, not a repository: give a "
                             "directory of source files or an installed package")
        return v


# The machine's state, not a corpus: never read (issue 44's fresh hostile set: corpus=/proc/self packed
# the process's environment, API keys included, into every request)
PSEUDO_FILE_SYSTEMS = ("/proc", "/sys", "/dev")
MAX_FILE_BYTES = 2_000_000   # assumed: larger is no source file of a repository; skipped unread (a 300 MB file was read whole)


def pseudo_fs(path: str | Path) -> str | None:
    """The pseudo file system ``path`` really lies in (``proc``, ``sys``, ``dev``), or None."""
    real = os.path.realpath(path)
    return next((p[1:] for p in PSEUDO_FILE_SYSTEMS if real == p or real.startswith(p + "/")), None)


def corpus_files(corpus: str) -> list[tuple[str, str]]:
    """A real corpus (relative path, text) in path order: an installed package's ``.py`` sources,
    or the text files under a directory. Exits with a clear error when it is neither, or when the
    directory is one of the machine's pseudo file systems (:data:`PSEUDO_FILE_SYSTEMS`)."""
    root = Path(corpus)
    pattern = "*"
    if root.is_dir() and (fs := pseudo_fs(root)):
        raise ValueError(f"whole_repo: corpus {corpus!r} is the machine's {fs} file system, not a "
                         "repository: give a directory of source files or an installed package")
    if not root.is_dir():
        spec = importlib.util.find_spec(corpus)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"whole_repo: corpus {corpus!r} is neither a directory nor an installed package")
        root, pattern = Path(next(iter(spec.submodule_search_locations))), "*.py"
        return [(f"{corpus}/{p}", t) for p, t in project_files(root, pattern)]
    return project_files(root, pattern)


def project_files(root: Path | None, pattern: str = "*") -> list[tuple[str, str]]:
    """Text files under ``root`` (relative path, text), in path order."""
    if root is None or not Path(root).is_dir():
        return []
    out = []
    for p in sorted(Path(root).rglob(pattern)):
        if "__pycache__" in p.parts:
            continue
        try:   # regular files only (no link followed out of the tree, no fifo or device), none too large
            st = p.lstat()
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                continue
            out.append((str(p.relative_to(root)), p.read_text(encoding="utf-8")))
        except (UnicodeDecodeError, OSError):
            continue
    return out


def file_block(path: str, text: str) -> str:
    return f'<file path="{path}">\n{text}\n</file>'


def strip_line_numbers(text: str) -> str:
    """A Read result's text without its ``cat -n`` prefixes (unchanged when it has none)."""
    lines = text.split("\n")
    numbered = sum(1 for x in lines if _NUMBERED.match(x))
    return _NUMBERED.sub("", text) if lines and numbered >= 0.8 * len(lines) else text


class WholeRepo(WindowedStrategy):
    """The repository pinned at the top of every session, the conversation compacted behind it."""

    KEPT_ACROSS_LAUNCHES = "its snapshot of the repository, with the files read in earlier launches, and its token gauge"

    name = "whole_repo"
    summary = "whole (real) repository in context up front; conversation compacted behind it"
    Config = WholeRepoConfig

    def __init__(self, config: WholeRepoConfig, env: StrategyEnv) -> None:
        self.files: list[tuple[str, str]] = []
        self.read: dict[str, str] = {}  # files learned from reads: path -> latest text
        self._packed: dict[str, str] | None = None
        self._corpus: list[tuple[str, str]] | None = None
        self._project = project_files(env.project_dir)
        super().__init__(config, env)

    def _budget_chars(self) -> int:
        c = self.config
        cap = int(c.max_repo_share * max(0, self.env.window - c.reserve_tokens) / self.gauge.ratio)
        want = int(c.repo_tokens / self.gauge.ratio) if c.repo_tokens is not None else cap
        return min(want, cap)

    def repository(self) -> list[tuple[str, str]]:
        """Project files (seeded, then read), else the corpus; cut to the budget, whole files."""
        reads = [(p, t) for p, t in reversed(self.read.items()) if p not in dict(self._project)]
        files = [*self._project, *reads]  # the newest reads before older ones: the budget drops the oldest
        if not files:
            if self._corpus is None:
                self._corpus = corpus_files(self.config.corpus)
            files = self._corpus
        budget = self._budget_chars()
        kept, total, dropped = [], 0, 0
        for path, text in files:
            n = len(file_block(path, text))
            if total + n > budget:
                dropped += 1
                continue
            kept.append((path, text))
            total += n
        self.counters.extra["repo_files"] = len(kept)
        self.counters.extra["repo_files_dropped"] = dropped
        self.counters.extra["repo_chars"] = total
        return kept

    def repo_message(self) -> Message | None:
        files = self.repository()
        if self._packed is not None and dict(files) == self._packed and len(self.history) and self.pinned:
            head = self.history[0]
            if head.meta.get("origin") == "repository":
                return head  # unchanged: the same bytes, the cached prefix holds
        self.files = files
        self._packed = dict(files)
        if not files:
            return None
        root = self.env.project_dir or "."
        blocks = [Block.text_block(f"<repository root=\"{root}\">\nThe whole repository follows, one file per block.")]
        blocks += [Block.text_block(file_block(p, t)) for p, t in files]
        blocks.append(Block.text_block("</repository>"))
        self.counters.extra["repo_packs"] += 1
        return Message("user", tuple(blocks), {"origin": "repository"})

    def session_head(self, resume: bool) -> list[Message]:
        if self.in_isolated_subtask:
            return []  # a recorded sub-agent's own context: no repository of its own
        m = self.repo_message()
        return [m] if m is not None else []

    def on_cut(self, dropped: History, start: int) -> list[Message] | None:
        """A compaction re-packs only a snapshot that is still the corpus once project files are
        known (a whole-repository agent does not re-send its repository mid-session otherwise)."""
        if self.in_isolated_subtask or not (self.read and self._corpus_packed()):
            return None
        m = self.repo_message()
        return [m] if m is not None else []

    def _corpus_packed(self) -> bool:
        return bool(self.files) and self._corpus is not None and self.files[0] in self._corpus

    def on_tool_results(self, message: Message) -> None:
        super().on_tool_results(message)
        if not self.config.learn_reads or self.in_isolated_subtask:
            return
        for b in message.blocks:
            if b.type != "tool_result" or b.is_error:
                continue
            name, inp = self.tool_uses.get(b.id or "", ("", {}))
            path = next((inp[k] for k in PATH_KEYS if isinstance(inp.get(k), str)), None)
            if name in self.config.read_tools and path and b.text and not inp.get("offset"):
                self.read.pop(path, None)
                self.read[path] = strip_line_numbers(b.text)
