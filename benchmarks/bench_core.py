"""Core throughput benchmark: bulk insert, upserts, reads and a delete on a generated "trips" table.

Run ``python benchmarks/bench_core.py`` (``make bench``) for the default 1M-row run, ``--quick``
for a smoke run, ``--help`` for every option. Every step is timed with wall time and reported
as rows/s, bytes and files added, and as a ratio to a plain-pyarrow baseline measured in the
same run (partitioned parquet written with ``pyarrow.dataset.write_dataset`` and read back), so
numbers from a noisy shared machine can still be compared between runs. Correctness is checked
against an in-memory model as the run goes; a mismatch makes the run exit with status 1 after
the results are written.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import pathlib
import platform
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO_ROOT))

import lakehouse  # noqa: E402

KEY = "uuid"
ORDERING = "ts"
PARTITION = "city"
CITIES = ["san_francisco", "new_york", "los_angeles", "chicago", "seattle", "boston", "austin",
          "denver", "miami", "portland"]
# Mildly skewed, as real cities are: the biggest partition holds ~3x the smallest.
CITY_WEIGHTS = np.array([18, 16, 12, 10, 9, 8, 8, 7, 6, 6], dtype=np.float64)
PAYMENTS = ["card", "cash", "wallet", "voucher"]
TS0 = 1_700_000_000_000  # epoch millis

TABLE_TYPES = {"mor": "MERGE_ON_READ", "cow": "COPY_ON_WRITE"}


def remove_tables(path) -> None:
    """Remove a folder of tables once this process's Iceberg publishers are done with them: a
    publisher still running (it yields to writes, so it often runs after the last one) would
    read files the removal takes and write its metadata into folders it recreates."""
    from lakehouse.iceberg import background
    background.wait_all()
    shutil.rmtree(path, ignore_errors=True)


class CorrectnessError(AssertionError):
    pass


# --- data ------------------------------------------------------------------------------------

def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A bijection on uint64: distinct ids give distinct keys, with no set to check against."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def make_keys(ids: np.ndarray, seed: int) -> pa.StringArray:
    """UUID-shaped keys (8-4-4-4-12 hex), unique per id, built without a Python loop."""
    ids = np.asarray(ids, dtype=np.uint64)
    n = len(ids)
    hi = _splitmix64(ids ^ np.uint64(seed * 0x5851F42D4C957F2D & 0xFFFFFFFFFFFFFFFF))
    lo = _splitmix64(hi + np.uint64(seed))
    raw = np.empty((n, 16), dtype=np.uint8)
    raw[:, :8] = hi.astype(">u8").view(np.uint8).reshape(n, 8)
    raw[:, 8:] = lo.astype(">u8").view(np.uint8).reshape(n, 8)
    hexed = np.empty((n, 32), dtype=np.uint8)
    hexed[:, 0::2] = _HEX[raw >> 4]
    hexed[:, 1::2] = _HEX[raw & 0x0F]
    out = np.full((n, 36), ord("-"), dtype=np.uint8)
    for dst, src in ((0, 0), (9, 8), (14, 12), (19, 16), (24, 20)):
        width = {0: 8, 9: 4, 14: 4, 19: 4, 24: 12}[dst]
        out[:, dst:dst + width] = hexed[:, src:src + width]
    offsets = np.arange(0, 36 * (n + 1), 36, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out.tobytes()))


def _labels(values: list[str], idx: np.ndarray) -> pa.Array:
    return pa.array(values, pa.string()).take(pa.array(idx.astype(np.int32)))


def make_rows(rng: np.random.Generator, ids: np.ndarray, city_idx: np.ndarray, ts: np.ndarray,
              seed: int) -> pa.Table:
    n = len(ids)
    riders = [f"rider-{i:04d}" for i in range(2000)]
    drivers = [f"driver-{i:04d}" for i in range(500)]
    fare = np.round(rng.gamma(2.0, 12.0, n), 2)
    return pa.table({
        KEY: make_keys(ids, seed),
        ORDERING: pa.array(ts, pa.int64()),
        PARTITION: _labels(CITIES, city_idx),
        "rider": _labels(riders, rng.integers(0, len(riders), n)),
        "driver": _labels(drivers, rng.integers(0, len(drivers), n)),
        "payment_type": _labels(PAYMENTS, rng.integers(0, len(PAYMENTS), n)),
        "fare": pa.array(fare, pa.float64()),
        "tip": pa.array(np.round(fare * rng.uniform(0.0, 0.3, n), 2), pa.float64()),
        "distance_km": pa.array(np.round(rng.gamma(2.0, 3.0, n), 3), pa.float64()),
        "begin_lat": pa.array(rng.uniform(-90, 90, n), pa.float64()),
        "begin_lon": pa.array(rng.uniform(-180, 180, n), pa.float64()),
    })


class Model:
    """What the table must hold: the latest ``ts`` of every live key (a dict, keyed by uuid),
    plus per-id arrays the generator uses to pick updates and deletes."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.next_id = 0
        self.city = np.zeros(0, dtype=np.int8)
        self.ts = np.zeros(0, dtype=np.int64)
        self.alive = np.zeros(0, dtype=bool)
        self.latest: dict[str, int] = {}
        self.touched: list[int] = []  # ids updated late or on time, for the sampled check
        self.deleted: list[int] = []

    def _grow(self, n: int) -> np.ndarray:
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        self.city = np.concatenate([self.city, self.rng.choice(
            len(CITIES), n, p=CITY_WEIGHTS / CITY_WEIGHTS.sum()).astype(np.int8)])
        self.ts = np.concatenate([self.ts, np.zeros(n, dtype=np.int64)])
        self.alive = np.concatenate([self.alive, np.zeros(n, dtype=bool)])
        return ids

    def keys(self, ids: np.ndarray) -> pa.StringArray:
        return make_keys(ids, self.seed)

    def _apply(self, ids: np.ndarray, ts: np.ndarray) -> None:
        keep = ts > self.ts[ids]  # event-time ordering: the highest ts wins, whatever arrives last
        won = ids[keep | ~self.alive[ids]]
        new_ts = np.where(keep | ~self.alive[ids], ts, self.ts[ids])
        self.ts[ids] = new_ts
        self.alive[ids] = True
        for k, t in zip(self.keys(won).to_pylist(), self.ts[won].tolist()):
            self.latest[k] = t

    def initial(self, n: int) -> pa.Table:
        ids = self._grow(n)
        ts = TS0 + self.rng.integers(0, 86_400_000, n) * 16  # *16: room for distinct later ts
        table = make_rows(self.rng, ids, self.city[ids], ts, self.seed)
        self._apply(ids, ts)
        return table

    def upsert_batch(self, m: int, update_fraction: float, late_fraction: float) -> tuple[pa.Table, dict]:
        live = np.flatnonzero(self.alive)
        n_upd = min(len(live), int(round(m * update_fraction)))
        upd = self.rng.choice(live, n_upd, replace=False) if n_upd else np.zeros(0, np.int64)
        ins = self._grow(m - n_upd)
        n_late = int(round(n_upd * late_fraction))
        late = self.rng.random(n_upd) < (n_late / n_upd if n_upd else 0)
        step = self.rng.integers(1, 1_000, n_upd) * 16 + 1  # odd offsets: never a tie
        upd_ts = np.where(late, self.ts[upd] - step, self.ts[upd] + step)
        ins_ts = TS0 + self.rng.integers(0, 86_400_000, len(ins)) * 16
        ids = np.concatenate([upd, ins])
        ts = np.concatenate([upd_ts, ins_ts])
        order = self.rng.permutation(len(ids))
        ids, ts = ids[order], ts[order]
        table = make_rows(self.rng, ids, self.city[ids], ts, self.seed)
        self.touched.extend(upd.tolist())
        self._apply(ids, ts)
        return table, {"updates": int(n_upd), "late_updates": int(late.sum()), "inserts": int(len(ins))}

    def delete_batch(self, d: int) -> pa.Table:
        live = np.flatnonzero(self.alive)
        ids = self.rng.choice(live, min(d, len(live)), replace=False)
        self.alive[ids] = False
        keys = self.keys(ids)
        for k in keys.to_pylist():
            del self.latest[k]
        self.deleted.extend(ids.tolist())
        return pa.table({KEY: keys, PARTITION: _labels(CITIES, self.city[ids])})

    def sample_ids(self, size: int) -> np.ndarray:
        """Live ids to check: touched ones first (where merging can go wrong), then random."""
        touched = np.unique(np.asarray(self.touched, dtype=np.int64))
        touched = touched[self.alive[touched]] if len(touched) else touched
        rng = np.random.default_rng(self.seed + 1)
        if len(touched) > size // 2:
            touched = rng.choice(touched, size // 2, replace=False)
        live = np.flatnonzero(self.alive)
        rest = rng.choice(live, min(len(live), size - len(touched)), replace=False)
        return np.unique(np.concatenate([touched, rest]))


def warm_up(rows: pa.Table, root: pathlib.Path) -> None:
    """One tiny pass through every code path first, so no step pays for lazy imports."""
    ds.write_dataset(rows, root / "baseline", format="parquet", partitioning=[PARTITION],
                     partitioning_flavor="hive")
    ds.dataset(root / "baseline", format="parquet", partitioning="hive").to_table()
    for label, ttype in TABLE_TYPES.items():
        t = lakehouse.create_table(str(root / label), name=f"warmup_{label}", table_type=ttype,
                                   record_key=KEY, partition_by=PARTITION, ordering_field=ORDERING,
                                   index="SIMPLE")
        t.bulk_insert(rows.slice(0, 100))
        t.upsert(rows.slice(50))
        t.read()
        t.delete(rows.slice(0, 10).select([KEY, PARTITION]))
        t.read(columns=[KEY])
    remove_tables(root)


# --- measuring -------------------------------------------------------------------------------

def scan(root: pathlib.Path) -> dict[str, int]:
    out: dict[str, int] = {}
    stack = [str(root)]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except FileNotFoundError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            else:
                try:
                    out[os.path.relpath(e.path, root)] = e.stat().st_size
                except FileNotFoundError:
                    continue  # a temporary file a concurrent writer (an Iceberg publisher) renamed
    return out


@dataclasses.dataclass
class Step:
    table: str
    step: str
    kind: str  # write | read
    rows: int
    seconds: float
    cpu_seconds: float
    bytes_written: int = 0
    data_bytes_written: int = 0
    files_added: int = 0
    extra: dict = dataclasses.field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")


@contextlib.contextmanager
def serial_writes() -> Iterator[None]:
    """Make lakehouse's thread pools run inline (they size themselves with os.cpu_count), so
    pyinstrument, which samples one thread, sees the work instead of a wait on the pool."""
    real = os.cpu_count
    os.cpu_count = lambda: 1  # type: ignore[assignment]
    try:
        yield
    finally:
        os.cpu_count = real  # type: ignore[assignment]


class Runner:
    def __init__(self, args: argparse.Namespace, out_dir: pathlib.Path) -> None:
        self.args = args
        self.out_dir = out_dir
        self.steps: list[Step] = []
        self.checks: list[dict] = []
        self.profiles: list[str] = []
        self._profilers: dict[str, Any] = {}

    def log(self, msg: str) -> None:
        if not self.args.quiet:
            print(msg, file=sys.stderr, flush=True)

    def timed(self, table: str, step: str, kind: str, root: pathlib.Path | None,
              fn: Callable[[], Any], rows: int | Callable[[Any], int],
              profile_as: str | None = None) -> tuple[Any, Step]:
        before = scan(root) if root is not None else {}
        prof = self._profilers.get(profile_as) if profile_as else None
        ctx = contextlib.ExitStack()
        if prof is not None:
            if not self.args.profile_threads:
                ctx.enter_context(serial_writes())
            prof.start()
        with ctx:
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                result = fn()
            finally:
                t1, c1 = time.perf_counter(), time.process_time()
                if prof is not None:
                    prof.stop()
        after = scan(root) if root is not None else {}
        added = [p for p in after if p not in before]
        grown = sum(max(0, after[p] - before[p]) for p in after if p in before)
        nbytes = sum(after[p] for p in added) + grown
        data_bytes = sum(after[p] for p in added if not p.startswith(".hoodie"))
        n = rows(result) if callable(rows) else rows
        s = Step(table, step, kind, n, t1 - t0, c1 - c0, nbytes, data_bytes, len(added))
        self.steps.append(s)
        self.log(f"  {table:>8} {step:<26} {n:>10,} rows {s.seconds:8.2f}s "
                 f"{s.rows_per_s:>12,.0f} rows/s")
        return result, s

    def check(self, table: str, name: str, ok: bool, details: dict) -> None:
        self.checks.append({"table": table, "check": name, "passed": bool(ok), **details})
        self.log(f"  {table:>8} check {name}: {'ok' if ok else 'FAILED'} {details if not ok else ''}")

    # --- baseline ----------------------------------------------------------------------------

    def baseline(self, data: pa.Table, work: pathlib.Path, run: int) -> None:
        root = work / f"baseline-{run}"
        _, w = self.timed("baseline", f"write_dataset#{run}", "write", root, lambda: ds.write_dataset(
            data, root, format="parquet", partitioning=[PARTITION], partitioning_flavor="hive",
            existing_data_behavior="overwrite_or_ignore"), data.num_rows)
        got, r = self.timed("baseline", f"read_dataset#{run}", "read", None, lambda: ds.dataset(
            root, format="parquet", partitioning="hive").to_table(), lambda t: t.num_rows)
        if got.num_rows != data.num_rows:
            raise CorrectnessError(f"baseline read {got.num_rows} rows, wrote {data.num_rows}")
        shutil.rmtree(root, ignore_errors=True)

    # --- one lakehouse table ------------------------------------------------------------------

    def table_run(self, label: str, index: str, initial: pa.Table, model_seed: int,
                  work: pathlib.Path) -> None:
        args = self.args
        model = Model(model_seed)
        data = model.initial(args.rows)
        assert data.equals(initial), "the generator is not deterministic"
        root = work / label
        opts: dict[str, Any] = dict(args.options)
        if args.buckets and (index == "BUCKET" or (not index and label == "mor")):
            opts["hoodie.bucket.index.num.buckets"] = args.buckets
        # No index given: the table a user gets with no options (MOR: BUCKET, COW: SIMPLE).
        table = lakehouse.create_table(str(root), name=f"trips_{label}", table_type=TABLE_TYPES[label],
                                       record_key=KEY, partition_by=PARTITION, ordering_field=ORDERING,
                                       index=index or None, **opts)
        load = getattr(table, args.load_op)
        self.timed(label, args.load_op, "write", root, lambda d=data: load(d), data.num_rows)
        del data

        if "upsert" in args.profile:
            from pyinstrument import Profiler
            self._profilers["upsert"] = Profiler(interval=0.001)
        for k in range(1, args.batches + 1):
            batch, info = model.upsert_batch(args.batch_rows, args.update_fraction, args.late_fraction)
            _, s = self.timed(label, f"upsert#{k}", "write", root, lambda: table.upsert(batch),
                              batch.num_rows, profile_as="upsert")
            s.extra.update(info)
        self._save_profile(label, "upsert")

        if "read" in args.profile:
            from pyinstrument import Profiler
            self._profilers["read"] = Profiler(interval=0.001)
        snap, _ = self.timed(label, "snapshot_read", "read", None, lambda: table.read(),
                             lambda t: t.num_rows, profile_as="read")
        self.verify(label, "after_upserts", snap, model)
        del snap
        ro, s = self.timed(label, "read_optimized_read", "read", None,
                           lambda: table.read(read_optimized=True), lambda t: t.num_rows,
                           profile_as="read")
        del ro
        self._save_profile(label, "read")

        delete_keys = model.delete_batch(args.delete_rows)
        self.timed(label, "delete", "write", root, lambda: table.delete(delete_keys), delete_keys.num_rows)
        after, _ = self.timed(label, "read_2cols_after_delete", "read", None,
                              lambda: table.read(columns=[KEY, ORDERING]), lambda t: t.num_rows)
        self.verify(label, "after_delete", after, model)
        gone = pc.sum(pc.cast(pc.is_in(after.column(KEY), value_set=delete_keys.column(KEY)),
                              pa.int64())).as_py() or 0
        self.check(label, "deleted_keys_absent", gone == 0,
                   {"deleted": delete_keys.num_rows, "still_present": int(gone)})
        del after
        st = table.stats()
        self.stats[label] = dataclasses.asdict(st)

    def verify(self, label: str, when: str, snap: pa.Table, model: Model) -> None:
        n = snap.num_rows
        self.check(label, f"row_count_{when}", n == len(model.latest),
                   {"rows": n, "expected": len(model.latest)})
        distinct = pc.count_distinct(snap.column(KEY)).as_py()
        self.check(label, f"unique_keys_{when}", distinct == n, {"rows": n, "distinct_keys": distinct})
        ids = model.sample_ids(self.args.check_sample)
        keys = model.keys(ids)
        got = snap.select([KEY, ORDERING]).filter(pc.is_in(snap.column(KEY), value_set=keys))
        seen: dict[str, int] = {}
        for k, t in zip(got.column(KEY).to_pylist(), got.column(ORDERING).to_pylist()):
            seen[k] = t
        wrong = [(k, seen.get(k), model.latest[k]) for k in keys.to_pylist()
                 if seen.get(k) != model.latest[k]]
        self.check(label, f"latest_ts_{when}", not wrong,
                   {"sampled_keys": len(ids), "mismatches": len(wrong),
                    "examples": [{"key": k, "read": g, "expected": e} for k, g, e in wrong[:5]]})

    def _save_profile(self, label: str, what: str) -> None:
        prof = self._profilers.pop(what, None)
        if prof is None or prof.last_session is None:
            return
        stem = self.out_dir / f"profile-{what}-{label}"
        stem.with_suffix(".html").write_text(prof.output_html())
        stem.with_suffix(".txt").write_text(prof.output_text(unicode=True, color=False))
        self.profiles += [str(stem.with_suffix(".html")), str(stem.with_suffix(".txt"))]
        self.log(f"  {label:>8} profile of {what}: {stem}.html / .txt")

    # --- whole run -----------------------------------------------------------------------------

    def run(self) -> dict:
        args = self.args
        self.stats: dict[str, dict] = {}
        work = pathlib.Path(args.workdir) if args.workdir else pathlib.Path(
            tempfile.mkdtemp(prefix="lakehouse-bench-"))
        work.mkdir(parents=True, exist_ok=True)
        t_start = time.perf_counter()
        try:
            # Every table gets the same rows: the same seed drives one model per table.
            initial = Model(args.seed).initial(args.rows)
            self.log(f"generated {initial.num_rows:,} rows ({initial.nbytes / 2**20:.0f} MiB in memory)")
            warm_up(initial.slice(0, 200), work / "warmup")
            # The baseline runs before, between and after the tables; the best run is the
            # reference, so a slow spell of the machine does not flatter the steps.
            self.baseline(initial, work, 1)
            for i, label in enumerate(args.table_types):
                index = (args.mor_index if label == "mor" else args.cow_index or "").upper()
                self.table_run(label, index, initial, args.seed, work)
                self.baseline(initial, work, i + 2)
        finally:
            if not args.keep:
                remove_tables(work)
        return self.report(time.perf_counter() - t_start, work)

    def report(self, total: float, work: pathlib.Path) -> dict:
        base = {kind: min((s for s in self.steps if s.table == "baseline" and s.kind == kind),
                          key=lambda s: s.seconds) for kind in ("write", "read")}
        rows = []
        for s in self.steps:
            b = base[s.kind]
            rows.append({
                "table": s.table, "step": s.step, "kind": s.kind, "rows": s.rows,
                "seconds": round(s.seconds, 4), "cpu_seconds": round(s.cpu_seconds, 4),
                "rows_per_s": round(s.rows_per_s, 1),
                "bytes_written": s.bytes_written, "data_bytes_written": s.data_bytes_written,
                "files_added": s.files_added,
                # how many times the baseline's time this step took, as is and per row
                "time_ratio": round(s.seconds / b.seconds, 3),
                "per_row_ratio": round((s.seconds / max(1, s.rows)) / (b.seconds / max(1, b.rows)), 3),
                **s.extra})
        a = self.args
        return {
            "benchmark": "core",
            "config": {"rows": a.rows, "batch_rows": a.batch_rows, "batches": a.batches,
                       "update_fraction": a.update_fraction, "late_fraction": a.late_fraction,
                       "delete_rows": a.delete_rows, "load_op": a.load_op, "table_types": a.table_types,
                       "mor_index": (a.mor_index or "default").upper(),
                       "cow_index": (a.cow_index or "default").upper(),
                       "buckets": a.buckets, "options": dict(a.options), "seed": a.seed, "quick": a.quick,
                       "check_sample": a.check_sample, "profile": a.profile,
                       "profile_threads": a.profile_threads,
                       "workdir": str(work) if a.keep else None},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "pyarrow": pa.__version__, "numpy": np.__version__,
                        "platform": platform.platform()},
            "baseline": {k: {"step": v.step, "seconds": round(v.seconds, 4), "rows": v.rows}
                         for k, v in base.items()},
            "steps": rows,
            "checks": self.checks,
            "correct": all(c["passed"] for c in self.checks) and bool(self.checks),
            "table_stats": self.stats,
            "profiles": self.profiles,
            "total_seconds": round(total, 2),
        }


def format_table(result: dict) -> str:
    head = ["table", "step", "rows", "seconds", "cpu s", "rows/s", "MiB written", "files",
            "x base", "x base/row"]
    lines = []
    for r in result["steps"]:
        lines.append([r["table"], r["step"], f"{r['rows']:,}", f"{r['seconds']:.2f}",
                      f"{r['cpu_seconds']:.2f}", f"{r['rows_per_s']:,.0f}",
                      f"{r['bytes_written'] / 2**20:.1f}" if r["kind"] == "write" else "-",
                      str(r["files_added"]) if r["kind"] == "write" else "-",
                      f"{r['time_ratio']:.2f}", f"{r['per_row_ratio']:.2f}"])
    widths = [max(len(head[i]), *(len(l[i]) for l in lines)) for i in range(len(head))]
    fmt = lambda cells: "  ".join(c.ljust(w) if i < 2 else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    out = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(l) for l in lines]
    b = result["baseline"]
    out.append("")
    out.append(f"x base: step time / best baseline time of the same kind (write: "
               f"{b['write']['seconds']:.2f}s, read: {b['read']['seconds']:.2f}s for "
               f"{b['write']['rows']:,} rows); x base/row: the same per row.")
    failed = [c for c in result["checks"] if not c["passed"]]
    out.append(f"correctness: {len(result['checks']) - len(failed)}/{len(result['checks'])} checks passed")
    for c in failed:
        details = {k: v for k, v in c.items() if k not in ("table", "check", "passed", "examples")}
        out.append(f"  FAILED {c['table']} {c['check']}: {json.dumps(details)}"
                   + (f" e.g. {c['examples'][0]}" if c.get("examples") else ""))
    out.append(f"total {result['total_seconds']:.1f}s")
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="smoke sizes: N=100k, M=10k, K=2 (explicit sizes still win)")
    p.add_argument("-n", "--rows", type=int, default=None,
                   help="rows loaded first, N (default 1,000,000)")
    p.add_argument("-m", "--batch-rows", type=int, default=None,
                   help="rows per upsert batch, M (default 50,000)")
    p.add_argument("-k", "--batches", type=int, default=None, help="upsert batches, K (default 3)")
    p.add_argument("--update-fraction", type=float, default=0.01,
                   help="share of each upsert batch that updates existing keys; the rest are "
                        "new keys (default %(default)s)")
    p.add_argument("--late-fraction", type=float, default=0.1,
                   help="share of the updates whose ts is older than the stored one, so they "
                        "must lose (default %(default)s)")
    p.add_argument("--delete-rows", type=int, default=None,
                   help="keys deleted (default batch-rows / 5)")
    p.add_argument("--load-op", choices=["bulk_insert", "insert"], default="bulk_insert",
                   help="operation that loads the first N rows (default %(default)s)")
    p.add_argument("--table-type", dest="table_types", default="mor,cow",
                   help="comma-separated: mor, cow (default %(default)s)")
    p.add_argument("--mor-index", default="",
                   help="index of the MERGE_ON_READ table (default: lakehouse's, BUCKET)")
    p.add_argument("--cow-index", default="",
                   help="index of the COPY_ON_WRITE table (default: lakehouse's, SIMPLE)")
    p.add_argument("--buckets", type=int, default=None,
                   help="hoodie.bucket.index.num.buckets (per partition) for a BUCKET index "
                        "(default: lakehouse's)")
    p.add_argument("--option", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   help="a hoodie.* option for create_table (repeatable), e.g. "
                        "hoodie.logfile.data.block.format=parquet")
    p.add_argument("--seed", type=int, default=42, help="data seed (default %(default)s)")
    p.add_argument("--check-sample", type=int, default=20_000,
                   help="keys whose latest ts is checked (default %(default)s)")
    p.add_argument("--out", default=str(REPO_ROOT / "bench-out" / "core.json"),
                   help="JSON result file (default bench-out/core.json)")
    p.add_argument("--workdir", default=None, help="where tables go (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the tables after the run")
    p.add_argument("--profile", nargs="?", const="upsert", default="",
                   help="pyinstrument the listed steps (upsert, read; comma-separated); reports go "
                        "beside --out. Timings of profiled steps are inflated and, unless "
                        "--profile-threads, run single-threaded")
    p.add_argument("--profile-threads", action="store_true",
                   help="keep lakehouse's thread pools while profiling (pyinstrument then sees "
                        "only the main thread waiting)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    a = p.parse_args(argv)
    n, m, k = (100_000, 10_000, 2) if a.quick else (1_000_000, 50_000, 3)
    a.rows = n if a.rows is None else a.rows
    a.batch_rows = m if a.batch_rows is None else a.batch_rows
    a.batches = k if a.batches is None else a.batches
    a.delete_rows = max(1, a.batch_rows // 5) if a.delete_rows is None else a.delete_rows
    if any("=" not in o for o in a.options):
        p.error("--option takes KEY=VALUE")
    a.options = [tuple(o.split("=", 1)) for o in a.options]
    a.table_types = [t.strip().lower() for t in a.table_types.split(",") if t.strip()]
    bad = [t for t in a.table_types if t not in TABLE_TYPES]
    if bad or not a.table_types:
        p.error(f"--table-type takes mor and/or cow, got {bad or a.table_types}")
    a.profile = [s.strip() for s in a.profile.split(",") if s.strip()]
    if any(s not in ("upsert", "read") for s in a.profile):
        p.error("--profile takes upsert and/or read")
    if not (0 <= a.update_fraction <= 1 and 0 <= a.late_fraction <= 1):
        p.error("fractions are between 0 and 1")
    if a.rows < 1 or a.batch_rows < 1 or a.batches < 0:
        p.error("sizes must be positive")
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    runner = Runner(args, out.parent)
    result = runner.run()
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(format_table(result))
    print(f"results: {out}")
    if not result["correct"]:
        print("CORRECTNESS CHECKS FAILED: the table does not hold what the writes put in "
              "(see 'checks' in the JSON)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
