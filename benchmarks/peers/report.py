"""The run's result as tables (aligned text for stdout, markdown for bench-out/peers.md) and
as a chart of step times by engine."""

from __future__ import annotations

import pathlib

from benchmarks.peers.targets import FLOOR, Steps, per_row

STEP_ORDER = ["load", "load_with_meta", "upsert", "iceberg_catch_up", "delete", "iceberg_catch_up_delete", "snapshot_read", "read_optimized_read", "compaction",
              "snapshot_read_after_compaction", "clean", "upsert_10x_budget", "snapshot_read_after_budget_upsert"]
ENGINE_ORDER = ["lakehouse-mor", "hudi-rs(mor)", "lakehouse-cow", "hudi-rs(cow)", "delta-rs",
                "pyiceberg", "floor"]


def _step_key(name: str) -> tuple[int, int]:
    base, _, k = name.partition("#")
    return (STEP_ORDER.index(base) if base in STEP_ORDER else len(STEP_ORDER), int(k or 0))


def _engine_key(name: str) -> int:
    return ENGINE_ORDER.index(name) if name in ENGINE_ORDER else len(ENGINE_ORDER)


def grid(head: list[str], rows: list[list[str]], markdown: bool, align: str) -> str:
    """``align``: one letter per column, l (text) or r (numbers), for the text layout."""
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) if rows else len(head[i])
              for i in range(len(head))]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w)
                         for c, w, a in zip(cells, widths, align)).rstrip()
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def _floor_ref(st: Steps, s: dict) -> dict | None:
    """The floor step a step is compared with: its write, its read, or its compaction."""
    if s["step"] == "compaction":
        return st.one(FLOOR, "compaction", s["n"])
    if s["step"] == "clean":
        return None
    return st.one(FLOOR, "load" if s["kind"] == "write" else "snapshot_read", s["n"])


def _mib(b: float) -> str:
    return f"{b / 2**20:.1f}"


def _label(s: dict) -> str:
    return f"{s['engine']}#{s['run']}" if s["engine"] == FLOOR else s["engine"]


def steps_table(result: dict, markdown: bool) -> str:
    sizes = result["config"]["rows"]
    st = Steps(result["steps"], sizes)
    many = len(sizes) > 1
    head = ["engine", "step", *(["N"] if many else []), "rows", "s", "rows/s", "MiB written", "files", "peak RSS MiB", "x floor/row"]
    ordered = sorted(result["steps"], key=lambda s: (s["n"], _engine_key(s["engine"]), s["run"],
                                                     _step_key(s["step"])))
    rows = []
    for s in ordered:
        ref = _floor_ref(st, s)
        ratio = f"{per_row(s) / per_row(ref):.2f}" if ref and s["engine"] != FLOOR else "-"
        write = s["kind"] == "write"
        peak = s.get("peak_rss_mib")
        rows.append([_label(s), s["step"], *([f"{s['n']:,}"] if many else []), f"{s['rows']:,}",
                     # A clean's work is files, not rows: no rate.
                     f"{s['seconds']:.3f}", f"{s['rows_per_s']:,.0f}" if s["step"] != "clean" else "-",
                     _mib(s["bytes_written"]) if write else "-", str(s["files_added"]) if write else "-",
                     f"{peak:,.0f}" if peak is not None else "-", ratio])
    return grid(head, rows, markdown, "ll" + "r" * (len(head) - 2))


def side_by_side(result: dict, markdown: bool) -> str:
    """Seconds per step, one column per engine, at the first size."""
    n = result["config"]["rows"][0]
    st = Steps(result["steps"], [n])
    engines = sorted({s["engine"] for s in result["steps"] if s["n"] == n}, key=_engine_key)
    names = sorted({s["step"] for s in result["steps"] if s["n"] == n}, key=_step_key)
    rows = []
    for name in names:
        cells = []
        for e in engines:
            s = st.one(e, name, n)
            cells.append(f"{s['seconds']:.3f}" if s else "-")
        rows.append([name] + cells)
    return grid([f"step (s, N={n:,})"] + engines, rows, markdown, "l" + "r" * len(engines))


def runs_table(result: dict, markdown: bool) -> str:
    head = ["engine", "N", "run", "wall s", "peak RSS MiB", "RSS after data MiB", "checks", "status"]
    rows = []
    for r in result["runs"]:
        checks = [c for c in result["checks"] if c["process"] == r["engine"] and c["n"] == r["n"]
                  and c["run"] == r["run"]]
        status = r["status"] + (f": {r['reason']}" if r.get("reason") else "")
        peak, base = r.get("peak_rss_mib"), r.get("rss_after_data_mib")
        rows.append([r["engine"], f"{r['n']:,}", str(r["run"]), f"{r.get('seconds', 0):.1f}",
                     f"{peak:,.0f}" if peak else "-", f"{base:,.0f}" if base else "-",
                     f"{sum(c['passed'] for c in checks)}/{len(checks)}", status])
    return grid(head, rows, markdown, "lrrrrrrl")


def targets_table(result: dict, markdown: bool) -> str:
    head = ["target", "threshold", "measured", "met", "detail"]
    rows = []
    for t in result["targets"]:
        met = {True: "met", False: "NOT MET", None: "-"}[t["met"]]
        rows.append([t["description"], t["threshold"],
                     f"{t['measured']:.2f}" if t["measured"] is not None else "-", met, t["detail"]])
    return grid(head, rows, markdown, "lrrll")


def format_text(result: dict) -> str:
    parts = ["engines", runs_table(result, False), "", "steps", steps_table(result, False), "",
             side_by_side(result, False), "", "targets (ratios from this run; not asserted)",
             targets_table(result, False), ""]
    failed = [c for c in result["checks"] if not c["passed"]]
    parts.append(f"correctness: {len(result['checks']) - len(failed)}/{len(result['checks'])} checks passed")
    for c in failed:
        details = {k: v for k, v in c.items() if k not in ("passed", "examples", "event")}
        parts.append(f"  FAILED {details}")
    parts += [f"  {note}" for note in result["notes"]]
    parts.append(f"total {result['total_seconds']:.1f}s")
    return "\n".join(parts)


def format_markdown(result: dict) -> str:
    c = result["config"]
    m = result["machine"]
    head = (f"N={', '.join(f'{n:,}' for n in c['rows'])}, M={c['batch_rows']:,}, K={c['batches']}, "
            f"{c['update_fraction']:.0%} updates ({c['late_fraction']:.0%} of them late), "
            f"{c['delete_rows']:,} deletes; {m['nproc']} CPUs ({m['cpu_model']}), "
            f"{m['memory_gib']} GiB RAM")
    versions = {k: v for r in result["runs"] for k, v in (r.get("versions") or {}).items() if v}
    if versions:
        head += "; " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
    parts = [f"# Peers benchmark\n\n{head}\n", "## Targets\n", targets_table(result, True),
             "\n## Seconds per step\n", side_by_side(result, True), "\n## Engines\n",
             runs_table(result, True), "\n## Steps\n", steps_table(result, True), ""]
    if result["notes"]:
        parts += ["## Notes\n"] + [f"* {n}" for n in result["notes"]] + [""]
    return "\n".join(parts)


def write_chart(result: dict, path: pathlib.Path) -> str | None:
    """Step time by engine at the first size (log scale); why not, if it cannot be drawn."""
    try:
        import matplotlib
    except ImportError:
        return "no chart: matplotlib is not installed"
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = result["config"]["rows"][0]
    st = Steps(result["steps"], [n])
    engines = sorted({s["engine"] for s in result["steps"] if s["n"] == n}, key=_engine_key)
    names = sorted({s["step"] for s in result["steps"] if s["n"] == n}, key=_step_key)
    if not engines or not names:
        return "no chart: no steps"
    height = 0.8 / len(engines)
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(names) + 1.5), dpi=90)
    for i, e in enumerate(engines):
        ys, xs = [], []
        for j, name in enumerate(names):
            s = st.one(e, name, n)
            if s:
                ys.append(j + i * height - 0.4 + height / 2)
                xs.append(max(s["seconds"], 1e-4))
        ax.barh(ys, xs, height=height, label=e)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("seconds (log scale)")
    ax.set_title(f"Step time by engine, N={n:,}, M={result['config']['batch_rows']:,}")
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None
