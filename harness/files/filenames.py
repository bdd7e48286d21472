"""File names made from ids that come from logs (tool_use ids): safe on any file system and
injective, so two results never share a file.

An id made only of ``[A-Za-z0-9._-]`` and short enough is used as it is (``toolu_01Ab.txt``, as
the agents write it). Any other id (a character replaced, too long, ``.`` / ``..``) keeps a
readable sanitised prefix and gains ``~`` and a digest of the whole id: ``~`` is not in the kept
set, so such a name never equals an id used as it is, and two ids that sanitise alike (``"."`` and
``" "``, both ``_``) differ by their digests.
"""

from __future__ import annotations

import hashlib
import re

_KEEP = re.compile(r"[^A-Za-z0-9._-]")
# assumed: 120 characters of id keep names readable and, with the digest and an extension, far
# below NAME_MAX (255 bytes on Linux and macOS), whatever folder they go in
MAX_STEM = 120
DIGEST_CHARS = 16   # 64 bits of SHA-256: a collision among one run's ids is not a practical risk


def safe_stem(name: str, max_stem: int = MAX_STEM) -> str:
    """``name`` itself when it is a safe file name stem, else ``<sanitised prefix>~<digest>``."""
    safe = _KEEP.sub("_", name)
    if safe == name and name not in ("", ".", "..") and len(name) <= max_stem:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
    return f"{safe[: max_stem - DIGEST_CHARS - 1]}~{digest}"


def safe_file_name(name: str, suffix: str = ".txt") -> str:
    return safe_stem(name) + suffix
