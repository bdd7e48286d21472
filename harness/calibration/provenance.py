"""Where a real log of the development population comes from, for the provenance a fitted data file
carries: its repository and commit (``../shared/population/dev.tsv``) and an opaque digest of the log,
never its path, session id or content (the logs have no licence: only aggregate figures and fitted
parameters are committed, with the repository and commit they came from)."""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

DEV_TSV = "population/dev.tsv"   # under the shared folder beside a checkout


@cache
def _table(path: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(``owner+name``, log file name) -> (repository, commit) of dev.tsv."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            out[(row["repo"].replace("/", "+"), Path(row["path"]).name)] = (row["repo"], row["commit"])
    return out


def default_tsv() -> Path | None:
    """``../shared/population/dev.tsv`` beside a checkout, or None (installed, or not there)."""
    from ctxsim.harness.files import bundled

    if not bundled.in_checkout():
        return None
    p = bundled.REPO.parent / "shared" / DEV_TSV
    return p if p.is_file() else None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def provenance(source: str | Path, tsv: Path | None = None, data: bytes | None = None) -> dict[str, Any]:
    """``{"repo", "commit", "digest"}`` of a log laid out as ``…/<owner+name>/<file>.jsonl`` (the
    layout of population/layout.sh); repo and commit null when dev.tsv does not list it. ``data``:
    the log's bytes (read from ``source`` when None and the file exists)."""
    p = Path(source)
    tsv = tsv or default_tsv()
    repo = commit = None
    if tsv is not None:
        hit = _table(str(tsv)).get((p.parent.name, p.name))
        if hit:
            repo, commit = hit
    if data is None:
        try:
            data = p.read_bytes()
        except OSError:
            data = str(p.name).encode()
    return {"repo": repo, "commit": commit, "digest": digest(data)}


def repositories(items: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The repositories and commits a fit used, with how many sessions each gave."""
    seen: dict[tuple[Any, Any], int] = {}
    for it in items:
        k = (it.get("repo"), it.get("commit"))
        seen[k] = seen.get(k, 0) + 1
    return [{"repo": r, "commit": c, "sessions": n} for (r, c), n in sorted(seen.items(), key=lambda x: (str(x[0][0]), str(x[0][1])))]
