"""The snapshot view of Merge-On-Read tables (lakehouse.iceberg.snapshot_view): after every step of
a held-out sequence (upserts, deletes, inserts into new partitions, pending and completed
compactions, cleans, a rolled-back failed write, a rollback, a restore to a savepoint), pyiceberg,
DuckDB's Iceberg extension and Daft read the Iceberg metadata equal to lakehouse's snapshot read
and to an in-memory model."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import lakehouse
from lakehouse import layout
from lakehouse.iceberg import sync_iceberg
from lakehouse.iceberg.overlay import group_folder, parse
from lakehouse.properties import rewrite_table_config
from tests.iceberg.iceberg_oracle import daft_read, iceberg_read, published, static_table
from tests.interop.hudi_oracle import hudi_read
from tests.model.oracle import Oracle

COLS = ["id", "city", "ts", "v"]
SNAPSHOT = {"hoodie.meta.sync.iceberg.view": "snapshot"}
CITIES = ["sf", "la", "ny", "tokyo", "paris"]


def duckdb_rows(location: str) -> list[dict]:
    from tests.iceberg.duckdb_judge import connect
    con = connect()
    got = con.execute(f"SELECT id, city, ts, v FROM iceberg_scan('{location}')").to_arrow_table()
    return sorted(got.to_pylist(), key=lambda r: r["id"])


def rows_of(table: pa.Table) -> list[dict]:
    return sorted(table.select(COLS).to_pylist(), key=lambda r: r["id"])


class Scenario:
    def __init__(self, path, *, partitioned: bool, ordering: bool, seed: int, **options) -> None:
        self.rng = random.Random(seed)
        self.t = lakehouse.create_table(str(path), name="view", record_key="id",
                                        partition_by="city" if partitioned else None,
                                        ordering_field="ts" if ordering else None,
                                        options=options)  # the snapshot view is the default
        self.model = Oracle("EVENT_TIME_ORDERING" if ordering else "COMMIT_TIME_ORDERING", "id",
                            "ts" if ordering else None)
        self.ordering = ordering
        self.cities = CITIES[:2]
        self.ts = 100
        self.steps: list[str] = []
        self.home: dict[str, str] = {}  # a key's partition: a non-global index keys per partition
        self.duplicates = options.get("hoodie.combine.before.upsert") == "false"

    def batch(self, keys) -> list[dict]:
        out = []
        if self.duplicates:
            # Without pre-combining a key twice in a batch reaches the log twice (a key new to
            # its file group goes to a new base file, which keeps both: Hudi's duplicates, not
            # this test's).
            keys = list(keys) + [k for k in keys if k in self.model.state][:3]
        for k in keys:
            self.ts += 1
            # Under event-time ordering some records arrive late: an older ts loses to what is stored.
            ts = self.ts - self.rng.choice([0, 0, 0, 50]) if self.ordering else self.ts
            out.append({"id": k, "city": self.home.setdefault(k, self.rng.choice(self.cities)), "ts": ts,
                        "v": f"{k}@{self.ts}"})
        return out

    def keys(self, n: int, fresh: float) -> list[str]:
        known = sorted(self.model.state)
        out = set()
        while len(out) < n:
            if known and self.rng.random() > fresh:
                out.add(self.rng.choice(known))
            else:
                out.add(f"k{self.rng.randrange(10_000):05d}")
        return sorted(out)

    # --- steps -----------------------------------------------------------------------------

    def upsert(self, n: int = 30, fresh: float = 0.3) -> str:
        return self.upsert_keys(self.keys(n, fresh))

    def delete(self, n: int = 5) -> str:
        keys = self.keys(n, 0.2)
        t = self.t.delete(pa.table({"id": keys, "city": [self.home.setdefault(k, self.cities[0]) for k in keys]}))
        self.model.delete(keys, t)
        return t

    def new_partition(self) -> str:
        self.cities.append(CITIES[len(self.cities) % len(CITIES)])
        keys = [f"n{len(self.cities)}-{i}" for i in range(10)]
        for k in keys:
            self.home[k] = self.cities[-1]
        return self.upsert_keys(keys)

    def upsert_keys(self, keys) -> str:
        rows = self.batch(keys)
        t = self.t.upsert(pa.Table.from_pylist(rows))
        self.model.upsert(rows, t)
        return t

    def failed_write(self) -> None:
        rows = self.batch(self.keys(10, 0.5))
        pending = self.t.upsert(pa.Table.from_pylist(rows), commit=False)
        self.t.rollback(pending)

    def rollback_last(self) -> None:
        last = self.t.timeline.completed_writes().last.time
        self.t.rollback()
        self._back_to(max((t for t, _ in self.model.history if t < last), default=None))

    def restore(self, savepoint: str) -> None:
        self.t.restore(savepoint)
        self._back_to(savepoint)

    def _back_to(self, t: str | None) -> None:
        self.model.history = [(h, s) for h, s in self.model.history if t is not None and h <= t]
        self.model.state = dict(self.model.history[-1][1]) if self.model.history else {}

    # --- the judges ------------------------------------------------------------------------

    def check(self, what: str, *, daft: bool = True) -> None:
        self.steps.append(what)
        res = sync_iceberg(self.t)
        location = res.metadata_location
        want = self.model.rows(columns=COLS)
        ours = rows_of(self.t.read())
        assert ours == want, f"{what}: lakehouse differs from the model"
        assert rows_of(iceberg_read(location)) == want, f"{what}: pyiceberg ({self.steps})"
        assert duckdb_rows(location) == want, f"{what}: DuckDB ({self.steps})"
        if daft:
            assert rows_of(daft_read(location)) == want, f"{what}: Daft ({self.steps})"


SCENARIOS = [dict(partitioned=p, ordering=o) for p in (True, False) for o in (False, True)]
# Log blocks a row file cannot copy (Avro; a key twice in a commit under event-time ordering):
# the commit's records are decoded, merged and written again.
DECODED = {"avro-commit": dict(partitioned=True, ordering=False, **{"hoodie.logfile.data.block.format": "avro"}),
           "avro-event": dict(partitioned=False, ordering=True, **{"hoodie.logfile.data.block.format": "avro"}),
           "uncombined-event": dict(partitioned=True, ordering=True, **{"hoodie.combine.before.upsert": "false"})}


@pytest.mark.parametrize("kind", SCENARIOS + list(DECODED.values()),
                         ids=[f"{'part' if s['partitioned'] else 'flat'}-{'event' if s['ordering'] else 'commit'}"
                              for s in SCENARIOS] + list(DECODED))
def test_a_held_out_sequence_reads_the_same_everywhere(tmp_path, kind):
    run_held_out_sequence(Scenario(tmp_path / "t", seed=42, **kind))


@pytest.mark.parametrize("partitioned", [True, False], ids=["part", "flat"])
def test_a_writer_per_commit_publishes_the_same(tmp_path, monkeypatch, partitioned):
    """Each publish in a process of its own (Airflow tasks, Spark jobs): nothing kept from an
    earlier commit (lakehouse.iceberg.memo: key indexes, log folds, manifests), every decision
    made from the files. The held-out sequence must read the same."""
    from lakehouse.iceberg import memo, publish

    sync = publish.sync_iceberg

    def cold(meta, **kw):
        memo.ARROW.clear()
        memo.METADATA.clear()
        return sync(meta, **kw)

    monkeypatch.setattr(publish, "sync_iceberg", cold)
    run_held_out_sequence(Scenario(tmp_path / "t", seed=7, partitioned=partitioned, ordering=True))


def run_held_out_sequence(s: "Scenario") -> None:
    s.upsert(60, fresh=1.0)
    s.check("first write")
    s.upsert()
    s.delete()
    s.check("upsert and delete")
    savepoint = s.upsert()
    s.t.create_savepoint(savepoint)
    s.new_partition()
    s.check("insert into a new partition")
    pending = s.t.schedule_compaction(force=True).instant
    s.upsert()
    s.delete()
    s.check("writes while a compaction is pending")
    s.t.run_compaction(pending)
    s.t.commit_compaction(pending)
    s.check("the compaction completed")
    s.upsert()
    s.failed_write()
    s.check("a failed write rolled back")
    s.upsert()
    s.t.compact(force=True)
    s.upsert()
    s.t.clean(options={"hoodie.cleaner.commits.retained": 1})
    s.check("compaction and clean")
    s.upsert()
    s.rollback_last()
    s.check("rollback of the last commit")
    s.restore(savepoint)
    s.check("restore to the savepoint")
    s.upsert()
    s.check("a write after the restore")


def test_the_first_use_a_new_user_tries(tmp_path):
    # The case: a default MOR table registered in Iceberg, 200 rows, an upsert of two
    # existing keys and a new one, a delete: Iceberg readers see all of it.
    t = lakehouse.create_table(str(tmp_path / "t"), name="trips", record_key="id", options=SNAPSHOT)
    t.upsert(pa.table({"id": list(range(200)), "v": ["a"] * 200}))
    t.upsert(pa.table({"id": [3, 4, 500], "v": ["b", "b", "b"]}))
    t.delete(pa.table({"id": [5]}))
    published(t)  # by the commits themselves, in the table's background publisher
    location = t.storage.uri(layout.ICEBERG)
    got = {r["id"]: r["v"] for r in iceberg_read(location).to_pylist()}
    assert len(got) == 200 and got[3] == got[4] == got[500] == "b" and 5 not in got
    assert got == {r["id"]: r["v"] for r in t.read().to_pylist()}
    st = static_table(location)
    summary = st.current_snapshot().summary
    assert summary["hudi.operation"] == "DELETE" and summary.operation.value == "delete"
    assert int(summary["total-position-deletes"]) >= 3 and int(summary["total-delete-files"]) >= 1


def test_overlay_files_stay_out_of_hudis_sight_and_go_with_their_slice(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="city", options=SNAPSHOT)
    t.upsert(pa.table({"id": list(range(40)), "city": ["sf", "la"] * 20, "v": [1] * 40}))
    t.upsert(pa.table({"id": list(range(10)), "city": ["sf", "la"] * 5, "v": [2] * 10}))
    t.delete(pa.table({"id": [11], "city": ["la"]}))
    published(t)  # the overlay files are the background publisher's
    files = [i.path for i in t.storage.list(layout.ICEBERG_DATA, recursive=True) if not i.is_dir]
    assert files and all(parse(p) is not None for p in files)
    # hudi-rs (a Hudi reader of its own) reads what lakehouse reads: the overlay is invisible to it.
    assert rows_of_any(hudi_read(str(tmp_path / "t"))) == rows_of_any(t.read())
    t.compact(force=True)
    t.upsert(pa.table({"id": [1], "city": ["la"], "v": [3]}))
    t.clean(options={"hoodie.cleaner.commits.retained": 1})
    sync_iceberg(t)
    left = {i.path for i in t.storage.list(layout.ICEBERG_DATA, recursive=True) if not i.is_dir}
    assert not left & set(files), "the overlay of the cleaned slices is still there"
    assert rows_of_any(iceberg_read(t.storage.uri(layout.ICEBERG))) == rows_of_any(t.read())


def rows_of_any(table: pa.Table) -> list[dict]:
    return sorted(table.select(["id", "v"]).to_pylist(), key=lambda r: r["id"])


def _set_view(t, view: str | None):
    """Set the table's view option (None: leave it out, as tables written before it existed)."""
    key = "hoodie.meta.sync.iceberg.view"
    extra = {k: v for k, v in t.config.extra.items() if k != key}
    with t.exclusive():
        rewrite_table_config(t.storage, t.config.replace(extra={**extra, **({key: view} if view else {})}),
                             may_change=[key])
    return lakehouse.open_table(t.path)


def test_a_table_published_read_optimized_publishes_the_snapshot_view_from_its_next_commit(tmp_path):
    """A Merge-On-Read table written when read_optimized was the default (no view option in its
    properties, its metadata the base files only) publishes the snapshot view, every log so far
    included, from its next commit on; switching back takes effect at the next commit too."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id",
                               options={"hoodie.meta.sync.iceberg.view": "read_optimized"})
    t.upsert(pa.table({"id": list(range(20)), "v": [1] * 20}))
    t.upsert(pa.table({"id": [1, 2], "v": [2, 2]}))
    published(t)
    location = t.storage.uri(layout.ICEBERG)
    assert static_table(location).properties["lakehouse.iceberg.view"] == "read_optimized"
    # The first write's base files, without the update in the logs.
    assert {r["id"]: r["v"] for r in iceberg_read(location).to_pylist()}[1] == 1
    t = _set_view(t, None)  # the table as an older release left it, opened by this one
    assert "hoodie.meta.sync.iceberg.view" not in (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert static_table(location).properties["lakehouse.iceberg.view"] == "read_optimized"
    t.upsert(pa.table({"id": [3], "v": [3]}))  # publishes the snapshot view, every log so far included
    published(t)
    st = static_table(location)
    assert st.properties["lakehouse.iceberg.view"] == "snapshot"
    assert rows_of_any(st.scan().to_arrow()) == rows_of_any(t.read())
    assert {r["id"]: r["v"] for r in st.scan().to_arrow().to_pylist()}[1] == 2
    t = _set_view(t, "read_optimized")
    t.upsert(pa.table({"id": [4], "v": [4]}))
    published(t)
    st = static_table(location)
    assert st.properties["lakehouse.iceberg.view"] == "read_optimized"
    assert rows_of_any(st.scan().to_arrow()) == rows_of_any(t.read(read_optimized=True))


def test_an_unknown_view_is_refused_before_the_table_exists(tmp_path):
    with pytest.raises(lakehouse.errors.ConfigError, match="hoodie.meta.sync.iceberg.view") as e:
        lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id",
                               options={"hoodie.meta.sync.iceberg.view": "snapshots"})
    assert "read_optimized" in e.value.help or "read_optimized" in e.value.message
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("file_id", ["../x", "a/b", "..", ".hidden", ""])
def test_a_file_id_that_is_not_a_plain_name_never_names_a_folder(file_id):
    # File ids come from the table's file names (another writer's, say): the overlay folder is
    # made of them, so one that could leave .hoodie/iceberg/data is refused before any write.
    with pytest.raises(lakehouse.errors.IcebergSyncError, match="file id"):
        group_folder("0123456789abcdef", file_id)


@pytest.mark.parametrize("index", ["BUCKET", "SIMPLE"])
def test_an_instant_whose_logs_were_cleaned_before_it_was_published_is_skipped(tmp_path, monkeypatch, index):
    """A delta commit not yet published when a compaction of its slice committed and a clean
    (one file version kept) deleted its log (a writer process killed before its publisher ran,
    or a publisher outrun by the services): its snapshot view cannot be made. It is skipped and
    remembered as retired, as a snapshot whose base files were cleaned is, and the next
    instant is made from a listing; before, every publish failed on the missing log for ever."""
    from lakehouse.iceberg import hook
    from lakehouse.iceberg.publish import RETIRED_PROPERTY

    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="city",
                               ordering_field="ts", index=index,
                               options={"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                                        "hoodie.cleaner.fileversions.retained": "1"})
    t.upsert(pa.table({"id": ["a", "b", "c"], "city": ["sf", "sf", "la"], "ts": [1, 1, 1], "v": ["1", "1", "1"]}))
    published(t)
    monkeypatch.setattr(hook, "after_commit", lambda *a, **k: None)  # nothing publishes meanwhile
    late = t.upsert(pa.table({"id": ["a", "c"], "city": ["sf", "la"], "ts": [2, 2], "v": ["2", "2"]}))
    t.compact(force=True)
    t.clean()
    monkeypatch.undo()
    res = sync_iceberg(t)
    assert late in res.skipped and late not in {i for i, _ in res.published}
    md = static_table(t.storage.uri(layout.ICEBERG)).metadata
    assert late in md.properties[RETIRED_PROPERTY].split(",")
    assert rows_of_any(iceberg_read(t.storage.uri(layout.ICEBERG))) == rows_of_any(t.read())
    t.upsert(pa.table({"id": ["b"], "city": ["sf"], "ts": [3], "v": ["3"]}))
    published(t)
    assert rows_of_any(iceberg_read(t.storage.uri(layout.ICEBERG))) == rows_of_any(t.read())
