"""Relative paths inside a storage root: the one check every path a storage is handed passes.

A path names a file or folder under the storage's root, ``/``-separated, in canonical form: no
leading ``/``, no empty, ``.`` or ``..`` segment, no NUL. Anything else is refused rather than
normalised: a path that is normalised on the way to the disk is not the path a commit records
(``./f`` written, ``f`` deleted as unlisted), and a ``..`` leaves the table. One trailing ``/``
(a folder) is accepted and dropped.
"""

from __future__ import annotations

import re

from lakehouse.errors import UnsafePathError

# A segment that is empty, '.' or '..', anywhere in the path; or a NUL (C strings end there, so
# the file system would see a shorter name than the one recorded).
_UNSAFE = re.compile(r"(?:^|/)(?:\.{1,2})?(?:/|$)|\x00")


def relative(path: str) -> str:
    """``path`` checked to stay under the root; the empty string names the root itself."""
    if path.endswith("/"):
        path = path[:-1]
    if path and _UNSAFE.search(path):
        raise UnsafePathError(f"the path {path!r} would leave the storage root or name another "
                              "file than it says (an absolute path, an empty, '.' or '..' "
                              "segment, or a NUL)",
                              help="paths inside a table are relative and canonical; if the name "
                                   "comes from data (a partition value), fix the value")
    return path


def join(*parts: str) -> str:
    """The parts joined with ``/`` (empty parts skipped), checked by :func:`relative`."""
    return relative("/".join(p for p in parts if p))
