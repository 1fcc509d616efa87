"""Hudi's service switches (issue 40, point 5): each read with Hudi's meaning, none refused.

- ``hoodie.table.services.enabled`` (HoodieWriteConfig.TABLE_SERVICES_ENABLED; Hudi's
  BaseHoodieWriteClient.tableServicesEnabled): false schedules nothing and archives nothing.
- ``hoodie.clean.automatic`` / ``hoodie.clean.async`` (HoodieCleanConfig.AUTO_CLEAN / ASYNC_CLEAN;
  BaseHoodieWriteClient.autoCleanOnCommit, AsyncCleanerService): clean after (or beside) a write.
- ``hoodie.clean.allow.multiple`` (HoodieCleanConfig.ALLOW_MULTIPLE_CLEANS;
  CleanPlanActionExecutor): a second plan beside a pending one.
- ``hoodie.clean.trigger.strategy`` (HoodieCleanConfig.CLEAN_TRIGGER_STRATEGY): NUM_COMMITS only.
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.config import CleanConfig, merged_options
from lakehouse.errors import ConfigError
from lakehouse.services.clean import plan_clean
from lakehouse.timeline.instant import Action
from tests.interop.hudi_oracle import canonical, hudi_read

SWITCHES = {"hoodie.clean.automatic": "false", "hoodie.clean.async": "false",
            "hoodie.clean.allow.multiple": "true", "hoodie.clean.trigger.strategy": "NUM_COMMITS",
            "hoodie.table.services.enabled": "true"}


def rows(keys, ts):
    return pa.table({"id": keys, "ts": [ts] * len(keys), "v": [f"{k}@{ts}" for k in keys]})


def table(path, table_type="COPY_ON_WRITE", **options):
    return lakehouse.create_table(str(path), name="s", table_type=table_type, record_key="id",
                                  ordering_field="ts", options=options or None)


def base_files(t) -> list[str]:
    return sorted(i.name for i in t.storage.list("", recursive=True) if i.name.endswith(".parquet")
                  and not i.path.startswith(".hoodie"))


def model_read(t):
    return canonical(t.read(), ["id", "ts", "v"])


def test_switches_are_read_not_refused(tmp_path):
    """A Hudi job's option set goes through every entry point (write, clean, compaction, archive)."""
    assert merged_options({}, SWITCHES, "write") == SWITCHES
    t = table(tmp_path / "t", "MERGE_ON_READ")
    t.upsert(rows(["a"], 1), options=SWITCHES)
    t.clean(options=SWITCHES)
    t.schedule_compaction(options={"hoodie.table.services.enabled": "true"})
    t.archive(options={"hoodie.table.services.enabled": "true"})
    with pytest.raises(ConfigError, match="hoodie.clean.trigger.strategy"):
        CleanConfig.from_options({"hoodie.clean.trigger.strategy": "TIME_ELAPSED"})


def test_services_disabled_schedule_nothing(tmp_path):
    """Off: no compaction plan (not even forced), no clean plan, no archival; on again: each runs."""
    t = table(tmp_path / "t", "MERGE_ON_READ")
    for i in range(6):
        t.upsert(rows(["a", "b"], i))
    off = {"hoodie.table.services.enabled": "false"}
    res = t.schedule_compaction(force=True, options=off)
    assert not res.scheduled and "hoodie.table.services.enabled" in res.reason
    assert not t.timeline.pending_compactions()
    assert t.compact(options={}).committed  # on (the default) it compacts
    for i in range(6, 40):
        t.upsert(rows(["a"], i))
    few = {"hoodie.cleaner.commits.retained": "2", "hoodie.keep.min.commits": "3",
           "hoodie.keep.max.commits": "5"}
    cleaned = t.clean(options={**few, **off})
    assert cleaned.instant is None and "hoodie.table.services.enabled" in cleaned.reason
    archived = t.archive(options={k: v for k, v in {**few, **off}.items() if "keep" in k or "services" in k})
    assert not archived.archived and "hoodie.table.services.enabled" in archived.reason
    assert t.clean(options=few).instant is not None
    assert t.archive(options={k: v for k, v in few.items() if "keep" in k}).archived


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("run_async", [False, True])
def test_automatic_clean_after_each_write(tmp_path, table_type, run_async):
    """With hoodie.clean.automatic each write leaves the table cleaned to the retention; without
    it (lakehouse's default) nothing is deleted until the clean service runs."""
    opts = {"hoodie.cleaner.commits.retained": "1", "hoodie.clean.automatic": "true",
            "hoodie.clean.async": str(run_async).lower()}
    auto, manual = table(tmp_path / "auto", table_type), table(tmp_path / "manual", table_type)
    threads = []
    for i in range(6):
        if i in (2, 4) and table_type == "MERGE_ON_READ":
            # Logs make no old versions: compactions do (new slices over the old ones).
            auto.compact(force=True)
            manual.compact(force=True)
        for t in (auto, manual):
            if t is manual:
                t.upsert(rows(["a", "b", "c"], i), options={"hoodie.cleaner.commits.retained": "1"})
                continue
            before = set(threading.enumerate())
            t.upsert(rows(["a", "b", "c"], i), options=opts)
            # The async cleaner is waited for: no clean thread outlives the write.
            # (The Iceberg publisher outlives writes by design: lakehouse.iceberg.background.)
            threads += [th.name for th in set(threading.enumerate()) - before
                        if not th.name.startswith("iceberg-publisher")]
    assert not threads
    cleans = auto.timeline.completed().filter(actions=[Action.CLEAN]).instants
    assert cleans, "no automatic clean ran"
    assert not manual.timeline.filter(actions=[Action.CLEAN]).instants
    if table_type == "COPY_ON_WRITE":
        # One version retained, the one before it for readers of the retained commit (CleanPlanner);
        # the async clean runs beside the write, so it does not see that write's version yet.
        assert len(base_files(auto)) <= 2 + run_async < len(base_files(manual))
    assert model_read(auto) == model_read(manual) == canonical(hudi_read(auto.path), ["id", "ts", "v"])


def test_automatic_clean_needs_a_commit(tmp_path):
    """Phase 1 of a two-phase write commits nothing: the clean waits for phase 2 (Table.commit)."""
    t = table(tmp_path / "t")
    opts = {"hoodie.cleaner.commits.retained": "1", "hoodie.clean.automatic": "true"}
    for i in range(3):
        t.upsert(rows(["a"], i))
    inst = t.upsert(rows(["a"], 9), options=opts, commit=False)
    assert not t.timeline.filter(actions=[Action.CLEAN]).instants
    t.commit(inst, options=opts)
    assert t.timeline.completed().filter(actions=[Action.CLEAN]).instants


def test_allow_multiple_cleans(tmp_path):
    """Off (lakehouse's default): a pending clean stops a new plan; on (Hudi's default): a second
    plan is written beside it, and Table.clean finishes both."""
    t = table(tmp_path / "t")
    for i in range(6):
        t.upsert(rows(["a", "b"], i))
    one = CleanConfig.from_options({"hoodie.cleaner.commits.retained": "1"})
    first = plan_clean(t.meta_client, one)
    assert first.instant is not None
    t.upsert(rows(["a"], 7))
    blocked = plan_clean(t.meta_client, one)
    assert blocked.instant is None and "hoodie.clean.allow.multiple" in blocked.reason
    many = CleanConfig.from_options({"hoodie.cleaner.commits.retained": "1", "hoodie.clean.allow.multiple": "true"})
    second = plan_clean(t.meta_client, many)
    assert second.instant is not None and second.instant != first.instant
    res = t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    assert set(res.resumed) >= {first.instant, second.instant}
    assert not t.timeline.pending().filter(actions=[Action.CLEAN]).instants
    assert model_read(t) == canonical(hudi_read(t.path), ["id", "ts", "v"])
