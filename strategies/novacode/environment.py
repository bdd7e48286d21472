"""The environment injection: working directory, platform, date and git state (N-COMP-12).

The seed names it once, beside memory: "压缩成功后，环境与记忆的注入标记被重置，下一轮重新注入" (after a
successful compaction the environment and memory injection markers are reset and both are injected
again on the next turn). What the block holds is not in the seed; the four items are what coding
agents tell their model about where it runs (Claude Code's ``<env>`` block: working directory, whether
it is a git repository, platform, today's date, and the git status; reported). They are
project-specific, so they cannot go in the system prompt, which holds only project-independent text
(N-CACHE-3): the block is a resident message (sent with every request, after the instruction files
and the memory index, like them cached).

The marker: the block is rendered once when a launch makes its first request and kept byte for
byte (so the cached prefix stays stable, even across midnight) until a compaction resets the marker;
the next request renders it again, with the date and git state of that moment. The prefix changed
at the compaction anyway, so the fresh block costs no extra cache break.

Git state is read from the files (``.git/HEAD`` of the nearest repository at or above the working
directory), never by running git: a replay must not depend on the machine it runs on. A trace seeds
those files through ``header.meta.files``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from ctxsim.harness.model.conversation import Message
from ctxsim.strategies.novacode.instructions import find_git_root

PLATFORM = "linux"  # assumed: the platform the replayed agent runs on (a parameter, environment_platform)
# assumed: traces hold time relative to their start; the date the block shows is this epoch plus the
# simulated clock (2026-01-05 09:00 UTC; a parameter, environment_epoch_s)
EPOCH_S = 1_767_603_600.0


def git_state(cwd: Path, top: Path | None = None) -> tuple[bool, str | None]:
    """(is the directory in a git repository, the checked-out branch or ``detached at <sha>``),
    the repository looked for no higher than ``top`` (the run directory: a checkout the run
    directory sits in is the machine's, not the session's)."""
    root = find_git_root(cwd, top)
    if root is None:
        return False, None
    head = root / ".git" / "HEAD"
    try:
        text = head.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:  # a worktree's .git file, or an unreadable HEAD: a repository, branch unknown
        return True, None
    if text.startswith("ref:"):
        ref = text[4:].strip()
        return True, ref.removeprefix("refs/heads/")
    return True, f"detached at {text[:12]}" if text else None


def render(cwd: Path | str, platform: str, date: str, in_git: bool, branch: str | None) -> str:
    lines = ["<environment>", f"Working directory: {cwd}", f"Is directory a git repo: {'yes' if in_git else 'no'}"]
    if in_git:
        lines.append(f"Git branch: {branch or 'unknown'}")
    lines += [f"Platform: {platform}", f"Today's date: {date}", "</environment>"]
    return "\n".join(lines)


def date_at(epoch_s: float, now_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s + now_s, tz=dt.UTC).date().isoformat()


@dataclass
class EnvironmentInjection:
    """The block and its marker (None: not injected in this context yet)."""

    cwd: Path
    platform: str = PLATFORM
    epoch_s: float = EPOCH_S
    message: Message | None = None
    top: Path | None = None     # the run directory: the git state is read no higher

    def current(self, now_s: float) -> Message:
        """The block, rendered when the marker is unset (first request of a launch, or the first
        after a compaction), else the same message object as before."""
        if self.message is None:
            in_git, branch = git_state(self.cwd, self.top)
            text = render(self.cwd, self.platform, date_at(self.epoch_s, now_s), in_git, branch)
            self.message = Message.user(text, origin="environment")
        return self.message

    def reset(self) -> None:
        """N-COMP-12 (or a new launch): the next request renders the block again."""
        self.message = None
