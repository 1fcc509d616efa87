"""Cleaning that follows a writer's commit: ``hoodie.clean.automatic`` and ``hoodie.clean.async``,
as Hudi's ``BaseHoodieWriteClient.autoCleanOnCommit`` runs it (in line after the commit) and its
``AsyncCleanerService`` (started with the write, waited for before the write returns).

The write's instant is committed whatever the clean does: a clean that fails is logged, not
raised, and the next clean finishes what it left pending (every clean does that first)."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING, Iterator

from lakehouse.config import CleanConfig
from lakehouse.services.clean import CleanResult, clean

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

log = logging.getLogger(__name__)


@contextlib.contextmanager
def cleaning_with_write(meta: "TableMetaClient", cfg: CleanConfig, *, commits: bool) -> Iterator[None]:
    """Around one write call of ``meta``'s table: cleans after it (or beside it) when ``cfg``
    says so and the call ``commits`` an instant (phase 1 of a two-phase write does not)."""
    if not (commits and cfg.automatic and cfg.services_enabled):
        yield
        return
    if not cfg.run_async:
        yield  # a write that raised committed nothing: no clean either, as in Hudi's postCommit
        _clean_logged(meta, cfg)
        return
    # Its own meta client: its own lock holder and heartbeats, so the two never share a lease.
    worker = threading.Thread(target=_clean_logged, args=(meta.fresh(), cfg),
                              name=f"lakehouse-async-clean-{meta.name}", daemon=True)
    worker.start()
    try:
        yield
    finally:
        worker.join()


def _clean_logged(meta: "TableMetaClient", cfg: CleanConfig) -> CleanResult | None:
    try:
        res = clean(meta, cfg)
    except Exception as e:  # the commit stands; the next clean resumes this one
        log.warning("automatic clean of %s failed after the write committed: %s "
                    "(the next clean finishes it)", meta.path, e)
        return None
    if res.instant:
        log.info("automatic clean %s of %s deleted %d file(s)", res.instant, meta.path, res.files_deleted)
    return res
