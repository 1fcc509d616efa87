"""Each table format behind the same few calls, so one step sequence drives them all.

Every engine gets the same rows and must end up holding what the in-memory model holds. The
model follows event-time ordering (the highest ``ts`` of a key wins, whenever it arrives), which
Hudi does through the table's ordering field; the peers are made to follow it too, each in its
own idiom (see :class:`Delta` and :class:`Iceberg`), and the cost of doing so is inside the timed
step. Engines import their package lazily: the parent process only checks that it is installed.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import pathlib
import time
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.bench_core import KEY, ORDERING, PARTITION


# Reads a user asks of the table with K+1 rounds of pending logs (issue 38): two columns, one
# key, 1% of the rows by ts. Each engine answers them its own way; the model checks every answer.
QUERIES = ("projection_read", "key_lookup", "range_read")


class Engine:
    name = ""
    packages: tuple[str, ...] = ()
    # What each step calls, for the JSON and the README (a step absent here is not supported).
    ops: dict[str, str] = {}

    def __init__(self, root: pathlib.Path, schema: pa.Schema, args: Any) -> None:
        self.root, self.schema, self.args = root, schema, args

    @classmethod
    def missing(cls) -> list[str]:
        return [p for p in cls.packages if importlib.util.find_spec(p) is None]

    def supports(self, step: str) -> bool:
        return step in self.ops

    def load(self, rows: pa.Table) -> dict | None:
        raise NotImplementedError

    def upsert(self, batch: pa.Table) -> dict | None:
        raise NotImplementedError

    def delete(self, keys: pa.Table) -> dict | None:
        raise NotImplementedError

    def read(self, columns: list[str] | None = None) -> pa.Table:
        raise NotImplementedError

    def read_optimized(self) -> pa.Table:
        raise NotImplementedError

    def query(self, columns: list[str] | None, filters: list[tuple]) -> pa.Table:
        """The rows passing ``filters`` (an AND of (column, op, value)), ``columns`` of them."""
        raise NotImplementedError

    def compact(self) -> dict | None:
        raise NotImplementedError

    def clean(self) -> dict | None:
        raise NotImplementedError

    def other_readers(self) -> dict[str, Callable[[], pa.Table]]:
        """Independent readers of this engine's table, timed and checked beside its own."""
        return {}

    def catch_up(self) -> dict | None:
        """Wait for what the engine publishes after its writes return (the iceberg_catch_up step)."""
        raise NotImplementedError

    @staticmethod
    def versions() -> dict[str, str]:
        return {}


# --- lakehouse -------------------------------------------------------------------------------

class Lakehouse(Engine):
    packages = ("lakehouse",)
    table_type = ""
    label = ""
    options: dict[str, Any] = {}  # the one option a variant sets (none: the table a user gets)
    ops = {"load": "Table.bulk_insert", "upsert": "Table.upsert", "delete": "Table.delete",
           "snapshot_read": "Table.read()", "read_optimized_read": "Table.read(read_optimized=True)",
           **{q: "Table.read(columns=..., filters=[...])" for q in QUERIES},
           "streamed_read": "Table.scan().to_arrow_batch_reader(), drained",
           "clean": 'Table.clean(options={"hoodie.cleaner.commits.retained": "1"})'}

    def __init__(self, root: pathlib.Path, schema: pa.Schema, args: Any) -> None:
        super().__init__(root, schema, args)
        import lakehouse
        # The table a user gets with no options (MOR: the BUCKET index with its default bucket
        # count; COW: SIMPLE). --buckets N tunes the MOR table's bucket count instead.
        opts: dict[str, Any] = dict(self.options)
        if self.table_type == "MERGE_ON_READ" and getattr(args, "buckets", None):
            opts.update({"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": args.buckets})
        self.table = lakehouse.create_table(
            str(root), name=f"trips_{self.label}", table_type=self.table_type, record_key=KEY,
            partition_by=PARTITION, ordering_field=ORDERING, options=opts)

    def budget_upsert(self, batch: pa.Table, budget_mib: float) -> dict:
        """An upsert under a write memory budget (Flink's write.task.max.size, in MB)."""
        return {"instant": self.table.upsert(batch, options={"write.task.max.size": budget_mib})}

    def load(self, rows: pa.Table) -> dict:
        return {"instant": self.table.bulk_insert(rows)}

    def upsert(self, batch: pa.Table) -> dict:
        return {"instant": self.table.upsert(batch)}

    def delete(self, keys: pa.Table) -> dict:
        return {"instant": self.table.delete(keys)}

    def read(self, columns: list[str] | None = None) -> pa.Table:
        return self.table.read(columns=columns)

    def read_optimized(self) -> pa.Table:
        return self.table.read(read_optimized=True)

    def streamed(self) -> dict:
        """Every row through the batch reader, dropped batch by batch: rows and bytes seen."""
        rows = nbytes = 0
        for batch in self.table.scan().to_arrow_batch_reader():
            rows += batch.num_rows
            nbytes += batch.nbytes
        return {"streamed_rows": rows, "streamed_mib": round(nbytes / 2**20, 1)}

    def query(self, columns: list[str] | None, filters: list[tuple]) -> pa.Table:
        return self.table.read(columns=columns, filters=filters or None)

    def compact(self) -> dict:
        r = self.table.compact(force=True)
        if not getattr(r, "committed", False):
            raise RuntimeError(f"compaction did not commit: {r}")
        return {"file_groups_compacted": r.operations, "rows_merged": r.rows}

    def clean(self) -> dict:
        r = self.table.clean(options={"hoodie.cleaner.commits.retained": "1"})
        return {"files_deleted": r.files_deleted, "bytes_freed": r.bytes_freed,
                **({"reason": r.reason} if r.reason else {})}

    @staticmethod
    def other_readers_available() -> bool:
        return importlib.util.find_spec("hudi") is not None

    def other_readers(self) -> dict[str, Callable[[], pa.Table]]:
        if not self.other_readers_available():
            return {}
        import hudi

        def hudi_rs() -> pa.Table:
            table = hudi.HudiTableBuilder.from_base_uri(str(self.root)).build()
            batches = table.read(hudi.HudiReadOptions())
            return pa.Table.from_batches(batches) if batches else self.schema.empty_table()
        return {f"hudi-rs({self.label})": hudi_rs}

    @staticmethod
    def versions() -> dict[str, str]:
        import lakehouse
        out = {"lakehouse": getattr(lakehouse, "__version__", "")}
        if Lakehouse.other_readers_available():
            import hudi
            out["hudi"] = getattr(hudi, "__version__", "")
        return out


class LakehouseMOR(Lakehouse):
    """The MOR table a user gets: its Iceberg snapshot view (issue 42) published by the table's
    background publisher, each commit's log records as Iceberg row and position delete files;
    pyiceberg reads that view beside lakehouse's reader, checked against the same model."""

    name, table_type, label = "lakehouse-mor", "MERGE_ON_READ", "mor"
    packages = ("lakehouse", "pyiceberg")
    iceberg_reader = True  # pyiceberg reads its Iceberg view (equal to the snapshot read)
    ops = {**Lakehouse.ops, "compaction": "Table.compact(force=True)",
           "snapshot_read_after_compaction": "Table.read()",
           "upsert_10x_budget": 'Table.upsert(batch of 10x the budget, options={"write.task.max.size": budget})',
           "iceberg_catch_up": "lakehouse.iceberg.background.wait(table): the Iceberg publishing "
                               "still running when the last upsert returned",
           "iceberg_catch_up_delete": "the same after the delete"}

    def upsert(self, batch: pa.Table) -> dict:
        from lakehouse.iceberg import background
        out = super().upsert(batch)
        # Whether the commit's Iceberg publishing was still running when the write returned.
        out["iceberg_publishing_after_return"] = not background.wait(self.table.storage.uri(), timeout=0)
        return out

    def catch_up(self) -> dict:
        from lakehouse.iceberg import background
        t0 = time.perf_counter()
        background.wait(self.table.storage.uri())
        return {"waited_s": round(time.perf_counter() - t0, 4)}

    def other_readers(self) -> dict[str, Callable[[], pa.Table]]:
        if not self.iceberg_reader:
            return super().other_readers()
        from pyiceberg.table import StaticTable
        location = f"{self.root}/.hoodie/iceberg"

        def pyiceberg() -> pa.Table:
            return StaticTable.from_metadata(location).scan().to_arrow()
        return {**super().other_readers(), f"pyiceberg({self.label})": pyiceberg}


class LakehouseMORReadOptimized(LakehouseMOR):
    """The MOR table with the one option ``hoodie.meta.sync.iceberg.view=read_optimized`` (what
    Apache XTable publishes: base files only): the upsert without the snapshot view's key
    lookups, beside the default's. Its Iceberg view misses the logs, so no Iceberg reader is
    checked against the model."""

    name, label = "lakehouse-mor-ro", "mor_ro"
    options = {"hoodie.meta.sync.iceberg.view": "read_optimized"}
    packages = ("lakehouse",)
    iceberg_reader = False
    # No budget upsert: the default MOR engine measures the write path's memory.
    ops = {k: v for k, v in LakehouseMOR.ops.items() if k != "upsert_10x_budget"}


class LakehouseCOW(Lakehouse):
    # Copy-on-write has no logs, so no compaction: upserts and deletes rewrite base files.
    name, table_type, label = "lakehouse-cow", "COPY_ON_WRITE", "cow"


# --- delta-rs --------------------------------------------------------------------------------

class Delta(Engine):
    """delta-rs. Event-time ordering is the merge's update predicate (an older ts matches but is
    not applied); the city is in the join condition because a key never changes city here, as
    in Hudi's non-global index, and it lets the merge prune partitions. A delete by a set of
    keys is a merge with ``when_matched_delete`` (a SQL ``IN`` list of 10k literals is not how
    anyone deletes a key set)."""
    name = "delta-rs"
    packages = ("deltalake",)
    JOIN = f"t.{KEY} = s.{KEY} AND t.{PARTITION} = s.{PARTITION}"
    ops = {"load": f"write_deltalake(partition_by=[{PARTITION!r}])",
           "upsert": f"DeltaTable.merge({JOIN!r}).when_matched_update_all(predicate="
                     f"'s.{ORDERING} >= t.{ORDERING}').when_not_matched_insert_all()",
           "delete": "DeltaTable.merge(...).when_matched_delete()",
           "snapshot_read": "DeltaTable.to_pyarrow_table()",
           **{q: "DeltaTable.to_pyarrow_dataset().to_table(columns=..., filter=...) (string columns cast "
                 "to one type: its files mix string and string_view)" for q in QUERIES},
           "compaction": "DeltaTable.optimize.compact()",
           "snapshot_read_after_compaction": "DeltaTable.to_pyarrow_table()",
           "clean": "DeltaTable.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)"}

    def __init__(self, root: pathlib.Path, schema: pa.Schema, args: Any) -> None:
        super().__init__(root, schema, args)
        self.dt = None

    def _merge(self, source: pa.Table):
        return self.dt.merge(source, predicate=self.JOIN, source_alias="s", target_alias="t")

    def load(self, rows: pa.Table) -> None:
        from deltalake import DeltaTable, write_deltalake
        write_deltalake(str(self.root), rows, partition_by=[PARTITION])
        self.dt = DeltaTable(str(self.root))

    def upsert(self, batch: pa.Table) -> dict:
        m = (self._merge(batch).when_matched_update_all(predicate=f"s.{ORDERING} >= t.{ORDERING}")
             .when_not_matched_insert_all().execute())
        return {k: m[k] for k in ("num_target_rows_updated", "num_target_rows_inserted",
                                  "num_target_rows_copied", "num_target_files_added") if k in m}

    def delete(self, keys: pa.Table) -> dict:
        m = self._merge(keys).when_matched_delete().execute()
        return {k: m[k] for k in ("num_target_rows_deleted", "num_target_rows_copied") if k in m}

    def read(self, columns: list[str] | None = None) -> pa.Table:
        return self.dt.to_pyarrow_table(columns=columns)

    def query(self, columns: list[str] | None, filters: list[tuple]) -> pa.Table:
        # Files delta-rs's merge wrote hold string_view columns, its first write's plain strings:
        # a string column is compared as one type (numbers keep their statistics pushdown).
        dataset = self.dt.to_pyarrow_dataset()
        expr = None
        for c, op, v in filters:
            f = pc.field(c).cast(pa.string()) if isinstance(v, str) else pc.field(c)
            term = {"=": f == v, ">=": f >= v, "<": f < v, ">": f > v, "<=": f <= v}[op]
            expr = term if expr is None else expr & term
        return dataset.to_table(columns=columns, filter=expr)

    def compact(self) -> dict:
        m = self.dt.optimize.compact()
        return {"files_added": m.get("numFilesAdded"), "files_removed": m.get("numFilesRemoved")}

    def clean(self) -> dict:
        gone = self.dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        return {"files_deleted": len(gone)}

    @staticmethod
    def versions() -> dict[str, str]:
        import deltalake
        return {"deltalake": deltalake.__version__}


# --- pyiceberg -------------------------------------------------------------------------------

class Iceberg(Engine):
    """pyiceberg on a SQLite catalog and a local warehouse, both inside the engine's folder (so
    the catalog's growth counts as written bytes). ``Table.upsert`` replaces any matched row, so
    event-time ordering is applied before it: the batch is joined with the stored (key, ts) and
    rows older than what is stored are dropped, inside the timed step. pyiceberg (0.12) cannot
    compact data files, and snapshot expiry only edits metadata (no file is deleted)."""
    name = "pyiceberg"
    packages = ("pyiceberg", "sqlalchemy")
    ops = {"load": "Table.append", "upsert": f"(drop rows older than stored) Table.upsert(join_cols=[{KEY!r}])",
           "delete": f"Table.delete(In({KEY!r}, keys))", "snapshot_read": "Table.scan().to_arrow()",
           "clean": "Table.maintenance.expire_snapshots().older_than(now)"}

    def __init__(self, root: pathlib.Path, schema: pa.Schema, args: Any) -> None:
        super().__init__(root, schema, args)
        from pyiceberg.catalog.sql import SqlCatalog
        (root / "warehouse").mkdir(parents=True, exist_ok=True)
        catalog = SqlCatalog("bench", uri=f"sqlite:///{root / 'catalog.db'}",
                             warehouse=(root / "warehouse").as_uri())
        catalog.create_namespace("bench")
        self.table = catalog.create_table("bench.trips", schema=schema)
        with self.table.update_spec() as spec:
            spec.add_identity(PARTITION)

    def load(self, rows: pa.Table) -> None:
        self.table.append(rows)

    def _newer_than_stored(self, batch: pa.Table) -> pa.Table:
        stored = self.read([KEY, ORDERING]).rename_columns([KEY, "_stored_ts"])
        joined = batch.join(stored, keys=KEY, join_type="left outer")
        # Kleene or: a new key has no stored ts (null) and must be kept.
        keep = pc.or_kleene(pc.is_null(joined["_stored_ts"]),
                            pc.greater_equal(joined[ORDERING], joined["_stored_ts"]))
        return joined.filter(keep).select(batch.column_names)

    def upsert(self, batch: pa.Table) -> dict:
        winners = self._newer_than_stored(batch)
        r = self.table.upsert(winners, join_cols=[KEY])
        return {"rows_updated": r.rows_updated, "rows_inserted": r.rows_inserted,
                "late_rows_dropped": batch.num_rows - winners.num_rows}

    def delete(self, keys: pa.Table) -> None:
        from pyiceberg.expressions import In
        self.table.delete(In(KEY, keys.column(KEY).to_pylist()))

    def read(self, columns: list[str] | None = None) -> pa.Table:
        scan = self.table.scan(selected_fields=tuple(columns)) if columns else self.table.scan()
        return scan.to_arrow()

    def clean(self) -> dict:
        before = len(self.table.snapshots())
        self.table.maintenance.expire_snapshots().older_than(
            dt.datetime.now(dt.timezone.utc)).commit()
        return {"snapshots_expired": before - len(self.table.snapshots()), "files_deleted": 0}

    @staticmethod
    def versions() -> dict[str, str]:
        import pyiceberg
        return {"pyiceberg": pyiceberg.__version__}


# --- the floor -------------------------------------------------------------------------------

class Floor(Engine):
    """Plain pyarrow: hive-partitioned parquet written with ``write_dataset`` and read back. It
    has no merge, so it stands for load, read and compaction (read + write of the rows a
    compaction rewrites) only; the sequence for it is in ``sequence.run_floor``."""
    name = "floor"
    packages = ("pyarrow",)
    ops = {"load": f"pyarrow.dataset.write_dataset(partitioning=[{PARTITION!r}], hive)",
           "load_with_meta": "the same write of the rows plus Hudi's five meta columns (the "
                             "format's own floor: no bloom filter, no table logic)",
           "snapshot_read": "pyarrow.dataset.dataset(hive).to_table()",
           "compaction": "read the live rows' dataset + write_dataset of them"}

    @staticmethod
    def versions() -> dict[str, str]:
        return {"pyarrow": pa.__version__}


ENGINES: dict[str, type[Engine]] = {e.name: e for e in (LakehouseMOR, LakehouseMORReadOptimized, LakehouseCOW, Delta,
                                                       Iceberg, Floor)}


def expected_steps(name: str, batches: int, with_hudi_rs: bool = True,
                   budget_step: bool = False) -> dict[str, list[str]]:
    """Steps each label (an engine, and an independent reader of its table) reports;
    ``budget_step``: the run also made the upsert under a memory budget (first size only)."""
    ops = {k: v for k, v in ENGINES[name].ops.items() if budget_step or k != "upsert_10x_budget"}
    order = ["load", "load_with_meta"] + [f"upsert#{i}" for i in range(1, batches + 1)] + [
        "delete", "snapshot_read", "read_optimized_read", *QUERIES, "compaction",
        "snapshot_read_after_compaction", "clean", "upsert_10x_budget"]
    out = {name: [s for s in order if s.split("#")[0] in ops]}
    if with_hudi_rs and issubclass(ENGINES[name], Lakehouse):
        reads = ["snapshot_read", "snapshot_read_after_compaction"]
        out[f"hudi-rs({ENGINES[name].label})"] = [s for s in reads if s in ops] + (
            ["snapshot_read_after_budget_upsert"] if "upsert_10x_budget" in ops else [])
        if getattr(ENGINES[name], "iceberg_reader", False):
            out[f"pyiceberg({ENGINES[name].label})"] = [s for s in reads if s in ops]
    return out
