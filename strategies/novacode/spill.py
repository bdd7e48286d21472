"""Layer 1 of NovaCode: large tool results are spilled to disk before they enter history.

Spilling is not truncation (N-SPILL-5): the whole result is written to a real file and history
keeps a ``<persisted-output>`` placeholder with a preview, the path and the size, so the model can
read the result back with its file-reading tool. A result is final once it enters history
(N-SPILL-6): this module only transforms a tool-results message on its way in, never one already
in history, which keeps cached prefixes byte-stable (N-CACHE-3).

Two layers here: :func:`plan_spills` is the pure selection (which results of one message to spill),
:func:`spill_message` is the I/O edge (writes the files, handles failed writes, builds the
placeholders).
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxsim.harness.files import confined
from ctxsim.harness.model.conversation import Message

SPILL_THRESHOLD_CHARS = 50_000  # N-SPILL-1: a single result longer than this is spilled
PREVIEW_CHARS = 2_000  # N-SPILL-1: the placeholder keeps the first 2,000 characters
AGGREGATE_BUDGET_CHARS = 200_000  # N-SPILL-2: tool results of one message, in total
# errors of one file name, not of the disk (errno(3)); any other OSError is a failed disk (N-SPILL-4)
NAME_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ, errno.EISDIR})
SPILL_DIR = "tool-results"  # N-SPILL-1: <launch session dir>/tool-results/<tool_use_id>.txt



def spill_file_name(tool_use_id: str) -> str:
    """``<tool_use_id>.txt``; an id a file name cannot hold as it is (ids come from logs) gets a
    sanitised name with a digest of the id: two ids never share a file (ctxsim.harness.files.filenames)."""
    from ctxsim.harness.files.filenames import safe_file_name

    return safe_file_name(tool_use_id, ".txt")


def placeholder(content: str, path: Path | str, preview_chars: int = PREVIEW_CHARS) -> str:
    """The text history keeps instead of a spilled result (N-SPILL-1): preview, path and size."""
    preview = content[:preview_chars]
    more = "\n..." if len(content) > preview_chars else ""
    return (
        "<persisted-output>\n"
        f"Output too large ({len(content):,} characters). Full output saved to: {path}\n"
        "Read that file to see all of it.\n\n"
        f"Preview (first {min(preview_chars, len(content)):,} characters):\n"
        f"{preview}{more}\n"
        "</persisted-output>"
    )


# --- the pure selection -----------------------------------------------------------------------

def plan_spills(
    sizes: Sequence[int],
    spilled_sizes: Sequence[int],
    exempt: Sequence[bool],
    threshold: int = SPILL_THRESHOLD_CHARS,
    budget: int = AGGREGATE_BUDGET_CHARS,
) -> list[int]:
    """Indices of the results of one message to spill, in the order they are spilled.

    ``sizes[i]`` is the length of result ``i`` inline, ``spilled_sizes[i]`` the length of its
    placeholder. Exempt results (read-backs) are never chosen.

    1. Every result over ``threshold`` is spilled (N-SPILL-1).
    2. Then, while the message's total is over ``budget``, the largest remaining result is spilled,
       one at a time (N-SPILL-2): largest first makes the count the fewest, because each spill frees
       ``size - placeholder`` and the placeholder's length hardly depends on the size. A result that
       would not shrink by spilling (shorter than its placeholder) is never chosen. If the budget
       cannot be met (the rest is exempt or small), everything eligible is spilled and the message
       stays over budget: nothing else may be done to a result (truncation is not NovaCode,
       N-SPILL-5).
    """
    n = len(sizes)
    if len(spilled_sizes) != n or len(exempt) != n:
        raise ValueError("sizes, spilled_sizes and exempt must have one entry per result")
    chosen: list[int] = []
    taken: set[int] = set()
    for i in range(n):
        if i not in taken and not exempt[i] and sizes[i] > threshold:
            chosen.append(i)
            taken.add(i)

    def total() -> int:
        return sum(spilled_sizes[i] if i in taken else sizes[i] for i in range(n))

    cur = total()
    if cur <= budget:
        return chosen
    rest = sorted((i for i in range(n) if i not in taken and not exempt[i] and sizes[i] > spilled_sizes[i]),
                  key=lambda i: (-sizes[i], i))
    for i in rest:
        if cur <= budget:
            break
        chosen.append(i)
        taken.add(i)
        cur -= sizes[i] - spilled_sizes[i]
    return chosen


# --- read-backs (N-SPILL-3) ---------------------------------------------------------------------

def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


_SPILL_REF = re.compile(r"(?:^|[\\/\s'\"=])" + re.escape(SPILL_DIR) + r"[\\/][^\\/\s'\"]+")


def names_spill_file(tool_input: Mapping[str, Any] | None, spill_dir: Path | None = None) -> bool:
    """Whether a tool call's input names a file under ``tool-results/`` (N-SPILL-3): its result is a
    read-back of a spilled result and is exempt from spilling, or the agent would loop reading a
    file back and spilling it again. The recorded agent's paths are its own, not this run's, so any
    path with a ``tool-results/<name>`` component counts, as does any path under ``spill_dir``."""
    if not tool_input:
        return False
    prefix = str(spill_dir) if spill_dir is not None else None
    for s in _strings(tool_input):
        if s.startswith(SPILL_DIR + "/") or _SPILL_REF.search(s):
            return True
        if prefix and prefix in s:
            return True
    return False


# --- the I/O edge -------------------------------------------------------------------------------

@dataclass
class SpillOutcome:
    """What happened to one tool-results message."""

    message: Message
    spilled: list[str] = field(default_factory=list)  # tool_use ids written to disk
    failed: list[str] = field(default_factory=list)  # write failed: exempt, inline (N-SPILL-4)
    readbacks: list[str] = field(default_factory=list)  # exempt read-backs (N-SPILL-3)
    not_tried: list[str] = field(default_factory=list)  # after a failed write in this message (N-SPILL-4)


Writer = Callable[[Path, str], None]


def write_spill_file(path: Path, content: str) -> None:
    """Write a spill file whole (N-SPILL-5: nothing lost). Raises OSError on failure."""
    confined.guard(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", errors="surrogatepass", newline="") as fh:
        fh.write(content)


def spill_message(
    message: Message,
    session_dir: Path,
    readback_ids: set[str] | frozenset[str] = frozenset(),
    *,
    threshold: int = SPILL_THRESHOLD_CHARS,
    budget: int = AGGREGATE_BUDGET_CHARS,
    preview_chars: int = PREVIEW_CHARS,
    fail: Callable[[str], bool] | None = None,
    write: Writer = write_spill_file,
) -> SpillOutcome:
    """Spill the tool results of one message as they arrive (N-SPILL-1…4).

    ``readback_ids`` are the tool_use ids whose call read a spill file (exempt, N-SPILL-3).
    ``fail(tool_use_id)`` injects a write failure (a seeded failure rate); a real OSError counts the
    same. A failed result is exempt and stays inline; it is not retried (N-SPILL-4). Once one write
    of this message failed, the results still planned are not tried against the same disk either
    (N-SPILL-4, "避免对着同一块坏磁盘反复重试": no hammering a bad disk); they stay inline too, and the
    message may stay over the aggregate budget (nothing else may be done to a result, N-SPILL-5).
    The next message tries the disk again: a failure may be transient.
    """
    blocks = list(message.blocks)
    idx = [k for k, b in enumerate(blocks) if b.type == "tool_result"]
    if not idx:
        return SpillOutcome(message)
    out = SpillOutcome(message)
    spill_dir = Path(session_dir) / SPILL_DIR
    paths = [spill_dir / spill_file_name(blocks[k].id or f"result-{k}") for k in idx]
    contents = [blocks[k].text for k in idx]
    sizes = [len(c) for c in contents]
    spilled_sizes = [len(placeholder(c, p, preview_chars)) for c, p in zip(contents, paths, strict=True)]
    exempt = [False] * len(idx)
    for j, k in enumerate(idx):
        if blocks[k].id in readback_ids:
            exempt[j] = True
            out.readbacks.append(blocks[k].id or "")
    done: list[int] = []
    disk_failed = False
    for j in plan_spills(sizes, spilled_sizes, exempt, threshold, budget):
        tid = blocks[idx[j]].id or ""
        if disk_failed:  # N-SPILL-4: the disk failed once in this message: not tried again
            out.not_tried.append(tid)
            continue
        try:
            if fail is not None and fail(tid):
                raise OSError("injected spill write failure")
            write(paths[j], contents[j])
        except OSError as e:
            out.failed.append(tid)  # N-SPILL-4: exempt, inline, not retried
            # a refusal of this one name (too long, invalid) is not a failed disk: the others are tried
            disk_failed = getattr(e, "errno", None) not in NAME_ERRNOS
            continue
        done.append(j)
        out.spilled.append(tid)
    for k in idx:
        b = blocks[k]
        if b.id in out.failed:
            blocks[k] = b.with_text(b.text, spill_exempt="write_failed")
        elif b.id in out.not_tried:
            blocks[k] = b.with_text(b.text, spill_exempt="disk_failed")
        elif b.id in out.readbacks:
            blocks[k] = b.with_text(b.text, spill_exempt="readback")
    for j in done:
        k = idx[j]
        b = blocks[k]
        blocks[k] = b.with_text(placeholder(contents[j], paths[j], preview_chars),
                                spilled=str(paths[j]), spilled_chars=sizes[j])
    if done or out.failed or out.not_tried or out.readbacks:
        out.message = Message(message.role, tuple(blocks), message.meta)
    return out
