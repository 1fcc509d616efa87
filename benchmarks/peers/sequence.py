"""One engine's run, inside its own process: the steps in order, timed, with checks against
the model between them. Results go out as JSON lines as they happen, so a run stopped by the
parent's timeout still reports what it did."""

from __future__ import annotations

import json
import pathlib
import shutil
import time
import traceback
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from benchmarks import bench_core
from benchmarks.bench_core import KEY, ORDERING, PARTITION, Model, Step, remove_tables
from benchmarks.peers.checks import MalformedKeys, checksum, live_rows, model_checksum
from benchmarks.peers.engines import ENGINES, Engine
from benchmarks.peers.memory import PeakMemory


class Events:
    def __init__(self, path: pathlib.Path, **tags: Any) -> None:
        self.path, self.tags = path, tags

    def emit(self, event: str, /, **data: Any) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"event": event, **self.tags, **data}, default=str) + "\n")


def step_record(s: Step) -> dict:
    return {"engine": s.table, "step": s.step, "kind": s.kind, "rows": s.rows,
            "seconds": round(s.seconds, 4), "cpu_seconds": round(s.cpu_seconds, 4),
            "rows_per_s": round(s.rows_per_s, 1), "bytes_written": s.bytes_written,
            "data_bytes_written": s.data_bytes_written, "files_added": s.files_added, **s.extra}


class EngineRunner(bench_core.Runner):
    """bench_core's timing and model checks, plus per-step memory, a whole-table checksum, and
    every result sent out as an event."""

    def __init__(self, args: Any, events: Events) -> None:
        super().__init__(args, pathlib.Path("."))
        self.events = events
        self.memory = PeakMemory()

    def step(self, label: str, name: str, kind: str, root: pathlib.Path | None, fn: Callable[[], Any],
             rows: int | Callable[[Any], int], extra: dict | None = None) -> Any:
        start = self.memory.start_step()  # what the step's peak is measured from
        result, s = self.timed(label, name, kind, root, fn, rows)
        if kind == "read" and s.seconds < 2:
            # Reads change nothing and take a fraction of a second, where a noisy machine's
            # hiccups show most: the fastest of a few runs counts (all runs are in the JSON).
            runs = [s.seconds]
            for _ in range(getattr(self.args, "read_repeats", 1) - 1):
                del result
                result, again = self.timed(label, name, kind, root, fn, rows)
                self.steps.remove(again)
                runs.append(again.seconds)
                if again.seconds < s.seconds:
                    s.seconds, s.cpu_seconds = again.seconds, again.cpu_seconds
            s.extra["seconds_all_runs"] = [round(x, 4) for x in runs]
        s.extra["peak_rss_mib"] = self.memory.end_step()
        s.extra["rss_start_mib"] = start
        s.extra.update(extra or {})
        if isinstance(result, dict):  # what a write or service reports about itself
            s.extra.update(result)
        self.events.emit("step", **step_record(s))
        return result

    def check(self, table: str, name: str, ok: bool, details: dict) -> None:
        super().check(table, name, ok, details)
        self.events.emit("check", **self.checks[-1])

    def verify(self, label: str, when: str, snap: pa.Table, model: Model) -> None:
        # Engines return strings as string, large_string or string_view; bench_core's sampled
        # lookup needs one type on both sides.
        snap = snap.select([KEY, ORDERING]).cast(pa.schema([(KEY, pa.string()), (ORDERING, pa.int64())]))
        super().verify(label, when, snap, model)
        expected = model_checksum(model)
        try:
            got, details = checksum(snap), {}
        except MalformedKeys as e:
            got, details = None, {"error": str(e)}
        self.check(label, f"checksum_{when}", got == expected,
                   {"checksum": got, "expected": expected, **details})


def _rows(t: pa.Table) -> int:
    return t.num_rows


def batch_alone(batch: pa.Table, scratch: pathlib.Path) -> dict:
    """The batch written alone as hive-partitioned parquet: its size is what an upsert writes at
    the very least, and its time, taken in this process just before the upsert, lets runs made
    minutes apart on a noisy machine be compared (see targets.upsert_scale)."""
    t0 = time.perf_counter()
    ds.write_dataset(batch, scratch, format="parquet", partitioning=[PARTITION], partitioning_flavor="hive")
    seconds = time.perf_counter() - t0
    size = sum(bench_core.scan(scratch).values())
    shutil.rmtree(scratch, ignore_errors=True)
    return {"batch_parquet_bytes": size, "batch_alone_seconds": round(seconds, 4)}


def warm_up(cls: type[Engine], rows: pa.Table, scratch: pathlib.Path, args: Any) -> None:
    """Every call once on a tiny table first, so no timed step pays for lazy imports or caches."""
    e = cls(scratch, rows.schema, args)
    e.load(rows.slice(0, 100))
    e.upsert(rows.slice(50))
    e.delete(rows.slice(0, 10).select([KEY, PARTITION]))
    e.read()
    e.read([KEY, ORDERING])
    if e.supports("streamed_read"):
        e.streamed()
    for s, call in (("read_optimized_read", e.read_optimized), ("compaction", e.compact),
                    ("clean", e.clean)):
        if e.supports(s):
            call()
    for q, (cols, filters) in {"projection_read": ([KEY], []), "key_lookup": ([KEY], [(KEY, "=", "x")]),
                               "range_read": (None, [(ORDERING, ">=", 0)])}.items():
        if e.supports(q):
            e.query(cols, filters)
    if e.supports("iceberg_catch_up"):
        e.catch_up()
    for reader in e.other_readers().values():
        reader()
    remove_tables(scratch)


def run_table_engine(runner: EngineRunner, cls: type[Engine], n: int, work: pathlib.Path) -> None:
    args = runner.args
    model = Model(args.seed)
    data = model.initial(n)
    runner.events.emit("data", data_checksum=model_checksum(model), rss_after_data_mib=runner.memory.current_mib())
    warm_up(cls, data.slice(0, 200), work / "warmup", args)
    root = work / "table"
    engine = cls(root, data.schema, args)
    name = cls.name
    readers = engine.other_readers()
    runner.step(name, "load", "write", root, lambda d=data: engine.load(d), n)
    row_bytes = data.nbytes / max(1, n)
    del data

    for k in range(1, args.batches + 1):
        batch, info = model.upsert_batch(args.batch_rows, args.update_fraction, args.late_fraction)
        info.update(batch_alone(batch, work / "batch-alone"))
        runner.step(name, f"upsert#{k}", "write", root, lambda: engine.upsert(batch), batch.num_rows, info)
    # Right after the last upsert (before the check reads the table): how far the view lagged.
    catch_up(runner, engine, "iceberg_catch_up", root, args.batch_rows)
    runner.verify(name, "after_upserts", engine.read([KEY, ORDERING]), model)

    keys = model.delete_batch(args.delete_rows)
    runner.step(name, "delete", "write", root, lambda: engine.delete(keys), keys.num_rows)
    catch_up(runner, engine, "iceberg_catch_up_delete", root, keys.num_rows)
    # After the delete a MERGE_ON_READ table has K+1 rounds of logs pending over its base files.
    # One untimed read first, for every engine: the first large read of a process pays for the
    # memory it touches the first time, which would go to whichever read step came first.
    engine.read()
    snap = runner.step(name, "snapshot_read", "read", None, engine.read, _rows)
    runner.verify(name, "after_delete", snap, model)
    snap_mib = snap.nbytes / 2**20
    del snap
    if engine.supports("streamed_read"):
        # Its peak (a step of its own) against the rows read whole: what the batch reader holds.
        got = runner.step(name, "streamed_read", "read", None, engine.streamed,
                          lambda r: r["streamed_rows"], {"materialised_mib": round(snap_mib, 1)})
        runner.check(name, "streamed_read", got["streamed_rows"] == len(model.latest),
                     {"rows": got["streamed_rows"], "expected": len(model.latest)})
    if engine.supports("read_optimized_read"):
        runner.step(name, "read_optimized_read", "read", None, engine.read_optimized, _rows)
    queries(runner, engine, model)
    for label, reader in readers.items():
        runner.verify(label, "after_delete", runner.step(label, "snapshot_read", "read", None, reader, _rows),
                      model)

    if engine.supports("compaction"):
        runner.step(name, "compaction", "write", root, engine.compact, len(model.latest))
        snap = runner.step(name, "snapshot_read_after_compaction", "read", None, engine.read, _rows)
        runner.verify(name, "after_compaction", snap, model)
        del snap
        if engine.supports("snapshot_read_after_compaction"):
            for label, reader in readers.items():
                got = runner.step(label, "snapshot_read_after_compaction", "read", None, reader, _rows)
                runner.verify(label, "after_compaction", got, model)
    if engine.supports("clean"):
        # Rows: the table the clean looks after (a clean's work is in files, not rows).
        runner.step(name, "clean", "write", root, engine.clean, len(model.latest))
        runner.verify(name, "at_end", engine.read([KEY, ORDERING]), model)
    if engine.supports("upsert_10x_budget") and getattr(args, "memory_budget_mb", 0):
        budget_upsert(runner, engine, model, row_bytes, root, readers)


def catch_up(runner: EngineRunner, engine: Engine, step: str, root: pathlib.Path, rows: int) -> None:
    """Publishing that runs after the writes return (the snapshot view's background publisher):
    how long the Iceberg view lagged the last write, and what it wrote since (the upserts'
    bytes are those of their steps and of this one: each commit's Iceberg files are written
    during the next step, the last one's here)."""
    if engine.supports("iceberg_catch_up"):
        runner.step(engine.name, step, "write", root, engine.catch_up, rows)


def queries(runner: EngineRunner, engine: Engine, model: Model) -> None:
    """Two columns of every row, one key, and 1% of the rows by ts, each answer checked."""
    name = engine.name
    if engine.supports("projection_read"):
        got = runner.step(name, "projection_read", "read", None, lambda: engine.query([KEY, "fare"], []), _rows)
        runner.check(name, "projection_read", got.num_rows == len(model.latest) and got.column_names == [KEY, "fare"],
                     {"rows": got.num_rows, "expected": len(model.latest), "columns": got.column_names})
    if engine.supports("key_lookup"):
        # A key updated since the load: its answer comes from the logs on a MERGE_ON_READ table.
        key = model.keys(model.sample_ids(8)[:1]).to_pylist()[0]
        got = runner.step(name, "key_lookup", "read", None,
                          lambda: engine.query([KEY, ORDERING, "fare"], [(KEY, "=", key)]), _rows)
        runner.check(name, "key_lookup", got.num_rows == 1 and got.column(ORDERING)[0].as_py() == model.latest[key],
                     {"key": key, "rows": got.num_rows, "expected_ts": model.latest[key],
                      "ts": got.column(ORDERING).to_pylist()[:3]})
    if engine.supports("range_read"):
        values = np.fromiter(model.latest.values(), dtype=np.int64)
        lo, hi = (int(x) for x in np.quantile(values, [0.5, 0.51]))
        want = int(((values >= lo) & (values < hi)).sum())
        got = runner.step(name, "range_read", "read", None,
                          lambda: engine.query(None, [(ORDERING, ">=", lo), (ORDERING, "<", hi)]), _rows)
        runner.check(name, "range_read", got.num_rows == want, {"rows": got.num_rows, "expected": want})


def budget_upsert(runner: EngineRunner, engine: Engine, model: Model, row_bytes: float,
                  root: pathlib.Path, readers: dict) -> None:
    """An upsert ten times the write's memory budget (write.task.max.size): its peak memory over
    what the process held before it (the batch itself included) is the write's own."""
    args, name = runner.args, engine.name
    budget = args.memory_budget_mb
    rows = int(10 * budget * 2**20 / row_bytes)
    batch, info = model.upsert_batch(rows, args.update_fraction, args.late_fraction)
    info.update(budget_mib=budget, batch_mib=round(batch.nbytes / 2**20, 1))
    runner.step(name, "upsert_10x_budget", "write", root,
                lambda b=batch: engine.budget_upsert(b, budget), batch.num_rows, info)
    del batch
    runner.verify(name, "after_budget_upsert", engine.read([KEY, ORDERING]), model)
    for label, reader in readers.items():
        got = runner.step(label, "snapshot_read_after_budget_upsert", "read", None, reader, _rows)
        runner.verify(label, "after_budget_upsert", got, model)


def _write_parquet(rows: pa.Table, root: pathlib.Path) -> None:
    ds.write_dataset(rows, root, format="parquet", partitioning=[PARTITION], partitioning_flavor="hive",
                     existing_data_behavior="overwrite_or_ignore")


def _read_parquet(root: pathlib.Path) -> pa.Table:
    return ds.dataset(root, format="parquet", partitioning="hive").to_table()


def _with_hudi_meta(rows: pa.Table) -> pa.Table:
    """``rows`` behind the five columns every Hudi record carries (values shaped as Hudi's)."""
    n = rows.num_rows
    t = "20260101000000000"

    def const(v: str) -> pa.Array:
        return pa.repeat(v, n).cast(pa.string())
    seq = pc.binary_join_element_wise(f"{t}_0_", pc.cast(pa.array(range(n), pa.int64()), pa.string()), "")
    meta = {"_hoodie_commit_time": const(t), "_hoodie_commit_seqno": seq,
            "_hoodie_record_key": rows.column(KEY), "_hoodie_partition_path": rows.column(PARTITION),
            "_hoodie_file_name": const(f"00000000-0000-0000-0000-000000000000-0_0-0-0_{t}.parquet")}
    return pa.table({**meta, **{c: rows.column(c) for c in rows.column_names}})


def run_floor(runner: EngineRunner, n: int, work: pathlib.Path) -> None:
    args = runner.args
    model = Model(args.seed)
    data = model.initial(n)
    runner.events.emit("data", data_checksum=model_checksum(model), rss_after_data_mib=runner.memory.current_mib())
    _write_parquet(data.slice(0, 200), work / "warmup")
    _read_parquet(work / "warmup")
    root = work / "floor"
    runner.step("floor", "load", "write", root, lambda d=data: _write_parquet(d, root), n)
    runner.verify("floor", "after_load", runner.step("floor", "snapshot_read", "read", None,
                                                     lambda: _read_parquet(root), _rows), model)
    with_meta = _with_hudi_meta(data)
    runner.step("floor", "load_with_meta", "write", work / "floor-meta",
                lambda w=with_meta: _write_parquet(w, work / "floor-meta"), n)
    del with_meta
    # Compaction's floor: read and write again the rows a compacted table holds, i.e. the live
    # rows after the same upserts and delete the engines ran (built here, untimed).
    batches = [model.upsert_batch(args.batch_rows, args.update_fraction, args.late_fraction)[0]
               for _ in range(args.batches)]
    model.delete_batch(args.delete_rows)
    live = live_rows(pa.concat_tables([data, *batches]), model)
    del data, batches
    _write_parquet(live, work / "live")
    out = work / "compacted"
    runner.step("floor", "compaction", "write", out,
                lambda: _write_parquet(_read_parquet(work / "live"), out), live.num_rows)
    runner.verify("floor", "after_compaction", _read_parquet(out), model)


def run_child(args: Any) -> int:
    events = Events(pathlib.Path(args.events), process=args.engine, n=args.child_rows, run=args.run)
    runner = EngineRunner(args, events)
    cls = ENGINES[args.engine]
    work = pathlib.Path(args.workdir) / f"{args.engine}-{args.child_rows}-{args.run}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    events.emit("start", versions=cls.versions(), per_step_memory=runner.memory.per_step)
    try:
        if args.engine == "floor":
            run_floor(runner, args.child_rows, work)
        else:
            run_table_engine(runner, cls, args.child_rows, work)
    except Exception as e:
        events.emit("error", message=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
        raise
    finally:
        if not args.keep:
            remove_tables(work)
    events.emit("done", peak_rss_mib=runner.memory.process_peak_mib())
    return 0

