"""The issue's targets, as ratios between steps of the same run (never absolute times).

Each target is measured at the first size of the run, except the scale target, which compares
the first size with the last. Comparisons with the floor use time per row (the inverse of
throughput), so a step that returns a few more rows than the floor's is not penalised for them;
where the floor ran twice (before and after the other engines), its faster run is the reference.
A target whose steps are missing (an engine skipped, timed out or failed) is "not measured".
"""

from __future__ import annotations

import dataclasses
from typing import Callable

MOR, COW, DELTA, FLOOR = "lakehouse-mor", "lakehouse-cow", "delta-rs", "floor"
MOR_RO = "lakehouse-mor-ro"  # the MOR table publishing the read-optimized Iceberg view
ICE_READER = "pyiceberg(mor)"  # pyiceberg reading the default MOR table's Iceberg (snapshot) view


class Steps:
    def __init__(self, steps: list[dict], sizes: list[int]) -> None:
        self.steps, self.sizes = steps, sizes

    def one(self, engine: str, step: str, n: int | None = None) -> dict | None:
        """The step at size ``n`` (default: the first size); the fastest where it ran twice."""
        n = self.sizes[0] if n is None else n
        found = [s for s in self.steps if s["engine"] == engine and s["step"] == step and s["n"] == n]
        return min(found, key=lambda s: s["seconds"]) if found else None

    def upserts(self, engine: str, n: int | None = None) -> list[dict]:
        n = self.sizes[0] if n is None else n
        return [s for s in self.steps
                if s["engine"] == engine and s["step"].startswith("upsert#") and s["n"] == n]


def per_row(s: dict) -> float:
    return s["seconds"] / max(1, s["rows"])


Measured = tuple[float | None, str]


def _missing(*what: str) -> Measured:
    return None, "not measured: no " + ", ".join(what)


def _upsert_vs_delta_at(st: Steps, n: int, engine: str = MOR) -> Measured:
    mor, delta = st.upserts(engine, n), st.upserts(DELTA, n)
    if not mor or not delta:
        return _missing(*(f"{e} upserts at N={n:,}" for e, v in ((engine, mor), (DELTA, delta)) if not v))
    m, d = (sum(s["seconds"] for s in x) / len(x) for x in (mor, delta))
    return d / m, f"mean per batch at N={n:,}: delta-rs merge {d:.3f}s, {engine} upsert {m:.3f}s"


def upsert_vs_delta(st: Steps, engine: str = MOR) -> Measured:
    return _upsert_vs_delta_at(st, st.sizes[0], engine)


def upsert_vs_delta_large(st: Steps, engine: str = MOR) -> Measured:
    """A merge rewrites the files it touches, so its cost grows with the table: the ratio at the
    run's largest size."""
    if len(st.sizes) < 2:
        return None, f"not measured: one size in this run (run with -n {st.sizes[0]},{st.sizes[0] * 5})"
    return _upsert_vs_delta_at(st, st.sizes[-1], engine)


def iceberg_pending_read(st: Steps) -> Measured:
    """pyiceberg's read of the snapshot view with K+1 rounds pending (row files and position
    deletes) against its read after the compaction (base files only)."""
    a, b = st.one(ICE_READER, "snapshot_read"), st.one(ICE_READER, "snapshot_read_after_compaction")
    if a is None or b is None:
        return _missing(f"{ICE_READER} reads before and after the compaction")
    return a["seconds"] / b["seconds"], f"{a['seconds']:.3f}s pending, {b['seconds']:.3f}s compacted"


def budget_memory(st: Steps) -> Measured:
    s = st.one(MOR, "upsert_10x_budget")
    if not s or s.get("peak_rss_mib") is None:
        return _missing(f"{MOR} upsert_10x_budget with a per-step peak")
    # The kernel's RSS counters lag by a few pages per thread: a step that freed memory can read
    # a hair below its start.
    extra = max(0.0, s["peak_rss_mib"] - s["rss_start_mib"])
    return extra / s["budget_mib"], (
        f"upsert of {s['batch_mib']:,.0f} MiB ({s['rows']:,} rows) under write.task.max.size="
        f"{s['budget_mib']:g} MB: peak RSS {s['peak_rss_mib']:,.0f} MiB over {s['rss_start_mib']:,.0f} "
        f"MiB before it (+{extra:,.0f} MiB), {s['seconds']:.2f}s, {s['files_added']} files")


def streamed_memory(st: Steps) -> Measured:
    """A drained batch reader's peak over its start, against the same rows read whole, at the
    run's largest size (the engine's process has read the table before: its peak is the step's
    own high-water mark, reset before it)."""
    n = st.sizes[-1]
    s = st.one(MOR, "streamed_read", n)
    if not s or s.get("peak_rss_mib") is None or not s.get("materialised_mib"):
        return _missing(f"{MOR} streamed_read at N={n:,} with a per-step peak")
    extra = max(0.0, s["peak_rss_mib"] - s["rss_start_mib"])
    return extra / s["materialised_mib"], (
        f"at N={n:,}: +{extra:,.0f} MiB over {s['rss_start_mib']:,.0f} MiB for rows of "
        f"{s['materialised_mib']:,.0f} MiB read whole, {s['seconds']:.2f}s")


def upsert_bytes(st: Steps, engine: str = MOR) -> Measured:
    mor = st.upserts(engine)
    if not mor:
        return _missing(f"{engine} upserts")
    # Publishing in the background writes each upsert's Iceberg files during the next step, the
    # last one's during the catch-up that follows the upserts: counted with them.
    late = st.one(engine, "iceberg_catch_up")
    wrote = sum(s["bytes_written"] for s in mor) + (late["bytes_written"] if late else 0)
    alone = sum(s["batch_parquet_bytes"] for s in mor)
    return wrote / alone, (f"per batch: {wrote / len(mor) / 2**20:.2f} MiB written, the batch alone as "
                           f"parquet {alone / len(mor) / 2**20:.2f} MiB")


def upsert_vs_read_optimized(st: Steps) -> Measured:
    """What the default's Iceberg snapshot view costs the upsert: its mean upsert against the
    same table publishing the read-optimized view (no key lookups), at the first size."""
    a, b = st.upserts(MOR), st.upserts(MOR_RO)
    if not a or not b:
        return _missing(*(f"{e} upserts" for e, v in ((MOR, a), (MOR_RO, b)) if not v))
    m, r = (sum(s["seconds"] for s in x) / len(x) for x in (a, b))
    return m / r, f"mean per batch: snapshot view (default) {m:.3f}s, read-optimized view {r:.3f}s"


def upsert_scale(st: Steps) -> Measured:
    if len(st.sizes) < 2:
        return None, f"not measured: one size in this run (run with -n {st.sizes[0]},{st.sizes[0] * 5})"
    small, big = st.upserts(MOR, st.sizes[0]), st.upserts(MOR, st.sizes[-1])
    if not small or not big:
        return _missing(f"{MOR} upserts at both sizes")
    a, b = (sum(s["seconds"] for s in x) / len(x) for x in (small, big))
    detail = f"mean upsert: {b:.3f}s at N={st.sizes[-1]:,}, {a:.3f}s at N={st.sizes[0]:,}"
    # The two sizes ran in processes minutes apart; each upsert against the batch written alone
    # just before it, in the same process, takes out most of the machine's drift between them.
    if all(s.get("batch_alone_seconds") for s in small + big):
        ra, rb = (sum(s["seconds"] for s in x) / sum(s["batch_alone_seconds"] for s in x) for x in (small, big))
        detail += f"; against the batch written alone: {rb / ra:.2f}"
    return b / a, detail


def pending_log_read(st: Steps) -> Measured:
    snap, ro = st.one(MOR, "snapshot_read"), st.one(MOR, "read_optimized_read")
    if not snap or not ro:
        return _missing(f"{MOR} snapshot and read-optimized reads")
    return snap["seconds"] / ro["seconds"], (
        f"snapshot {snap['seconds']:.3f}s ({snap['rows']:,} rows), read-optimized "
        f"{ro['seconds']:.3f}s ({ro['rows']:,} rows)")


def compaction_throughput(st: Steps) -> Measured:
    c, f = st.one(MOR, "compaction"), st.one(FLOOR, "compaction")
    if not c or not f:
        return _missing(f"{MOR} and floor compactions")
    return c["rows_per_s"] / f["rows_per_s"], (
        f"MOR {c['rows_per_s']:,.0f} rows/s, floor read+write {f['rows_per_s']:,.0f} rows/s")


def vs_floor(engine: str, step: str, floor_step: str) -> Callable[[Steps], Measured]:
    def measure(st: Steps) -> Measured:
        s, f = st.one(engine, step), st.one(FLOOR, floor_step)
        if not s or not f:
            return _missing(f"{engine} {step} and floor {floor_step}")
        detail = f"{s['seconds']:.3f}s for {s['rows']:,} rows, floor {f['seconds']:.3f}s for {f['rows']:,}"
        meta = st.one(FLOOR, "load_with_meta") if step == "load" else None
        if meta:
            detail += (f"; {per_row(s) / per_row(meta):.2f}x the floor writing Hudi's meta columns "
                       f"too ({meta['seconds']:.3f}s)")
        return per_row(s) / per_row(f), detail
    return measure


def vs_delta(engine: str, step: str, delta_step: str | None = None, *, largest: bool = False
             ) -> Callable[[Steps], Measured]:
    """``engine``'s ``step`` against delta-rs's (the same rows, the same run): time / time."""
    def measure(st: Steps) -> Measured:
        n = st.sizes[-1] if largest else st.sizes[0]
        if largest and len(st.sizes) < 2:
            return None, f"not measured: one size in this run (run with -n {n},{n * 5})"
        s, d = st.one(engine, step, n), st.one(DELTA, delta_step or step, n)
        if not s or not d:
            return _missing(f"{engine} {step} and {DELTA} {delta_step or step} at N={n:,}")
        return s["seconds"] / d["seconds"], (f"at N={n:,}: {s['seconds']:.3f}s ({s['rows']:,} rows), "
                                             f"delta-rs {d['seconds']:.3f}s ({d['rows']:,} rows)")
    return measure


@dataclasses.dataclass(frozen=True)
class Target:
    key: str
    text: str
    op: str  # ">=" or "<="
    threshold: float
    measure: Callable[[Steps], Measured]


TARGETS = [
    Target("mor_upsert_vs_delta_merge", "MOR upsert vs delta-rs merge (x faster)", ">=", 5, upsert_vs_delta),
    Target("mor_upsert_vs_delta_merge_large", "MOR upsert vs delta-rs merge at the largest N (x faster)", ">=",
           10, upsert_vs_delta_large),
    Target("mor_upsert_bytes", "MOR upsert bytes / the batch alone as parquet", "<=", 2, upsert_bytes),
    Target("mor_upsert_vs_read_optimized_view", "MOR upsert, Iceberg snapshot view (default) / read-optimized view",
           "<=", 1.5, upsert_vs_read_optimized),
    Target("mor_iceberg_pending_read", "pyiceberg read of the Iceberg view, K+1 rounds pending / compacted",
           "<=", 1.5, iceberg_pending_read),
    Target("mor_upsert_scale", "MOR upsert time, largest N / first N", "<=", 1.3, upsert_scale),
    Target("mor_pending_log_read", "MOR snapshot read with K+1 log rounds / read-optimized read", "<=", 1.5,
           pending_log_read),
    Target("mor_compaction_throughput", "MOR compaction rows/s / floor read+write rows/s", ">=", 0.5,
           compaction_throughput),
    Target("mor_budget_memory", "MOR upsert of 10x write.task.max.size: peak memory / budget", "<=", 2,
           budget_memory),
    Target("mor_streamed_memory", "MOR drained batch reader at the largest N: peak / rows read whole", "<=",
           0.25, streamed_memory),
    Target("mor_bulk_insert", "MOR bulk_insert / floor write (per row)", "<=", 1.5,
           vs_floor(MOR, "load", "load")),
    Target("cow_bulk_insert", "COW bulk_insert / floor write (per row)", "<=", 1.5,
           vs_floor(COW, "load", "load")),
    Target("mor_read_optimized", "MOR read-optimized read / floor read (per row)", "<=", 1.3,
           vs_floor(MOR, "read_optimized_read", "snapshot_read")),
    Target("cow_read_optimized", "COW read-optimized read / floor read (per row)", "<=", 1.3,
           vs_floor(COW, "read_optimized_read", "snapshot_read")),
    # Reads of the table with K+1 rounds of pending logs, against delta-rs on the same rows.
    *(Target(f"{short}_{key}_vs_delta{'_large' if large else ''}",
             f"{short.upper()} {what} / delta-rs{' at the largest N' if large else ''}", "<=", limit,
             vs_delta(engine, step, delta_step, largest=large))
      for short, engine, key, what, step, delta_step, limit in (
          ("mor", MOR, "snapshot", "whole snapshot read", "snapshot_read", None, 1.5),
          ("mor", MOR, "read_optimized", "read-optimized read", "read_optimized_read", "snapshot_read", 1.0),
          ("mor", MOR, "projection", "2-column read", "projection_read", None, 1.0),
          ("mor", MOR, "key_lookup", "one-key lookup", "key_lookup", None, 0.1),
          ("mor", MOR, "range", "1% ts range read", "range_read", None, 1.0),
          ("cow", COW, "snapshot", "whole read", "snapshot_read", None, 1.0),
          ("cow", COW, "projection", "2-column read", "projection_read", None, 1.0),
          ("cow", COW, "range", "1% ts range read", "range_read", None, 1.0))
      for large in ((False, True) if engine == MOR else (False,))),
]


def evaluate(steps: list[dict], sizes: list[int]) -> list[dict]:
    st = Steps(steps, sizes)
    out = []
    for t in TARGETS:
        value, detail = t.measure(st)
        met = None if value is None else (value >= t.threshold if t.op == ">=" else value <= t.threshold)
        out.append({"target": t.key, "description": t.text, "threshold": f"{t.op} {t.threshold:g}",
                    "measured": None if value is None else round(value, 3), "met": met, "detail": detail})
    return out
