"""``make demo``: a streaming query writes a table while Airflow's compaction DAG compacts it.

On the embedded platform (started if it is not running, as ``make run`` does, without its first
cycle), for the registry's first table whose source is in ``mode: stream``:

1. a feeder lands a batch of the demo change stream in the table's landing folder every few
   seconds (new trips, corrections, late events, cancellations);
2. a Structured Streaming query (the ``stream`` Spark application, ``spark-submit``) applies the
   landed files through ``writeStream.format("lakehouse")``, a delta commit per micro-batch;
3. each commit is announced to Airflow as an event of the table's commits Asset (``POST
   /api/v2/assets/events``, what the ingest DAG's task does for its own commits), and, once
   ``hoodie.compact.inline.max.delta.commits`` delta commits wait (lakehouse.services.due), of
   its compaction-due Asset, on which Airflow's scheduler runs ``<table>_compaction``;
4. at the end the table is checked: equal to its history replayed with the Python API (each
   micro-batch's files as Spark's checkpoint lists them, the compactions where they fell: every
   landed file applied once) and, where hudi-rs is installed, read identically by it. The platform keeps running (``make stop``).

    python -m deploy.stream_demo [--seconds 90] [--every 4] [--table NAME]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import click
import pyarrow as pa
import pyarrow.parquet as pq

from deploy import platform as plat
from lakehouse.airflow import registry as registry_mod
from lakehouse.airflow.assets import due_asset
from lakehouse.airflow.dags import commits_asset, due, stream_args
from lakehouse.errors import LakehouseError, TableNotFoundError
from lakehouse.services.due import compaction_due
from lakehouse.sources import demo
from lakehouse.spark.apps.stream import checkpoint_location, source_files
from lakehouse.spark.datasource import DEFAULT_IDENTIFIER, sink_commits
from lakehouse.spark.submit import submit_path
from lakehouse.table import Table, create_table, open_table
from lakehouse.timeline.instant import Action
from lakehouse.timeline.tags import instant_extra

DEMO_TAG = "demo.query"


class DemoError(LakehouseError):
    """The demo could not run, or the table it wrote is not what it should be."""


@dataclass
class DemoReport:
    table: str
    landed: int = 0
    streamed: list[tuple[str, int]] = field(default_factory=list)  # (instant, batch id)
    compactions: list[dict[str, str]] = field(default_factory=list)  # instant, dag run
    rows: int = 0
    model_equal: bool = False
    hudi_rs_equal: bool | None = None  # None: hudi-rs not installed
    stream_status: str = ""

    @property
    def interleaved(self) -> bool:
        """A compaction committed while the stream kept committing (a commit on each side)."""
        times = [t for t, _ in self.streamed]
        return any(min(times) < c["instant"] < max(times) for c in self.compactions) if times else False


def stream_entry(reg: registry_mod.Registry, name: str | None) -> registry_mod.TableEntry:
    tables = [t for t in reg.tables if (name is None or t.name == name)]
    streamed = [t for t in tables if t.source.mode == "stream" and t.source.kind == "demo" and t.is_mor]
    if not streamed:
        raise DemoError(f"no Merge-On-Read table with a demo source in mode: stream"
                        f"{f' named {name}' if name else ''} in the registry",
                        help="add one (dags/tables.yaml has trips_live), or pass --table")
    return streamed[0]


def query_command(entry: registry_mod.TableEntry, seconds: float, trigger_s: float, stop_file: Path) -> list[str]:
    """spark-submit of the stream application, continuously (the feeder lands the batches) until
    ``stop_file`` exists or ``seconds`` have passed."""
    args = stream_args(entry)
    if "--demo-batches" in args:  # the feeder lands the demo batches, not the query
        i = args.index("--demo-batches")
        del args[i:i + 4]  # --demo-batches N --demo-rows M
    return [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
            "--conf", "spark.ui.showConsoleProgress=false", submit_path(), "stream", entry.path, *args,
            "--processing-time", str(trigger_s), "--run-for", str(seconds), "--stop-file", str(stop_file),
            "--tag", f"{DEMO_TAG}=make-demo"]


def _asset_id(api: plat.Api, name: str) -> int:
    found = api.get("/assets", name_pattern=name).get("assets", [])
    for a in found:
        if a["name"] == name:
            return int(a["id"])
    raise DemoError(f"Airflow knows no asset {name}", help="is the DAG processor done parsing dags/? see var/airflow/logs")


def _compactions(table: Table) -> list[dict[str, str]]:
    tl = table.timeline
    out = []
    for inst in tl.completed().filter(actions=[Action.COMMIT]).instants:
        if tl.is_compaction(inst.time):
            extra = instant_extra(table.active, inst, tl)
            out.append({"instant": inst.time, "dag_id": extra.get("airflow.dag_id", ""),
                        "run_id": extra.get("airflow.run_id", "")})
    return out


def _feed(directory: str, rows: int, every: float, stop: threading.Event, counter: list[int]) -> None:
    stream = demo.DemoStream(rows=rows)
    while not stop.is_set():
        demo.write_batches(directory, 1, stream)
        counter[0] += 1
        stop.wait(every)


def stream_files(table: Table, checkpoint: str) -> dict[str, list[str]]:
    """The files each streaming commit of ``table`` applied (by instant), from Spark's checkpoint."""
    files = source_files(checkpoint)
    out = {}
    for instant, batch in sink_commits(table, DEFAULT_IDENTIFIER):
        if not files.get(batch):
            raise DemoError(f"batch {batch} (instant {instant}) took no file Spark's checkpoint knows of",
                            help=f"is {checkpoint} this table's checkpoint?")
        out[instant] = files[batch]
    return out


def replay_model(table: Table, path: str, files_of: dict[str, list[str]]) -> Table:
    """The table's history replayed with the Python API on a new table of the same settings: the
    files each delta commit applied (``files_of``, by instant) as one upsert, each compaction
    where the timeline has it. Equal rows mean every landed file was applied once, in its batch,
    and the writes made during a compaction merged as they should. (Not simply the files written
    one by one: a cancelled trip whose late correction arrives after the cancellation stays
    deleted until a compaction drops its delete from the logs, as in Hudi, whose base files keep
    no tombstones; so the rows depend on where the compactions fell.)"""
    cfg = table.config
    # A scratch table, removed once compared: no Iceberg metadata (its publisher would still be
    # reading the files the removal deletes).
    model = create_table(path, name="model", table_type="MERGE_ON_READ", index="BUCKET", schema=demo.SCHEMA,
                         options={"hoodie.bucket.index.num.buckets": str(cfg.bucket_num),
                                  "hoodie.meta.sync.iceberg.enabled": "false"}, **demo.TABLE_OPTIONS)
    tl = table.timeline
    for inst in tl.completed_writes().instants:
        if inst.time in files_of:
            model.upsert(pa.concat_tables([pq.read_table(p.removeprefix("file://")) for p in files_of[inst.time]],
                                          promote_options="permissive"))
        elif tl.is_compaction(inst.time):
            model.compact(force=True)
    return model


def check_against_model(table: Table, checkpoint: str) -> tuple[bool, bool | None]:
    """The table against :func:`replay_model`, and against hudi-rs's read of it."""
    cols = [demo.TABLE_OPTIONS["record_key"], "city", "event_ts", "fare", "_hoodie_is_deleted"]
    ours = _canonical(table.read(columns=cols), cols)
    with tempfile.TemporaryDirectory() as tmp:
        model = replay_model(table, os.path.join(tmp, "model"), stream_files(table, checkpoint))
        model_equal = _canonical(model.read(columns=cols), cols) == ours
    try:
        import hudi  # noqa: PLC0415 - optional: the hudi-rs reader
    except ImportError:
        return model_equal, None
    theirs = hudi.HudiTableBuilder.from_base_uri(table.path.removeprefix("file://")).build().read(
        hudi.HudiReadOptions())
    read = pa.Table.from_batches(theirs) if theirs else None
    return model_equal, read is not None and _canonical(read.select(cols), cols) == ours


def _canonical(t, cols) -> list[tuple]:
    return sorted(tuple(r[c] for c in cols) for r in t.select(cols).to_pylist())


def run(layout: plat.Layout, *, seconds: float = 90, every: float = 4, trigger_s: float = 3,
        table: str | None = None, echo: Callable[[str], Any] = print, settle_s: float = 300,
        extend_s: float = 180) -> DemoReport:
    """Streams for ``seconds``, and on (up to ``extend_s`` more) until a compaction by the DAG has
    committed between two streaming commits: on a busy machine the DAG's first run may come late."""
    if plat.running_pgid(layout) is None:
        echo("starting the platform (Airflow on 127.0.0.1) ...")
        plat.start(layout, cycle=False, echo=echo)
    api = plat.Api(layout)
    entry = stream_entry(registry_mod.load(str(layout.registry)), table)
    # A compaction on a cron (no "due" Asset): the demo triggers the DAG when it is due.
    asset_id = (_asset_id(api, commits_asset(entry).name),
                _asset_id(api, due_asset(entry.name, "compaction").name) if "compaction" in due(entry) else None)
    api.patch(f"/dags/{entry.dag_id('compaction')}", {"is_paused": False})
    report = DemoReport(table=entry.path)
    try:
        before = open_table(entry.path)
        last = before.timeline.completed_writes().instants
        after = last[-1].time if last else None
        seen_compactions = {c["instant"] for c in _compactions(before)}
    except TableNotFoundError:
        after, seen_compactions = None, set()

    echo(f"streaming into {entry.path} for {seconds:.0f} s or until the compaction DAG has compacted; a demo batch lands every {every:.0f} s in {entry.source.dir}")
    stop = threading.Event()
    landed = [0]
    feeder = threading.Thread(target=_feed, args=(entry.source.dir, entry.source.demo_rows, every, stop, landed),
                              daemon=True)
    feeder.start()
    log = layout.home / "logs" / "stream-demo.log"
    stop_file = layout.home / "stream-demo.stop"
    stop_file.unlink(missing_ok=True)
    with open(log, "w") as err:
        query = subprocess.Popen(query_command(entry, seconds + extend_s + 60, trigger_s, stop_file),
                                 env=layout.env(), stdout=subprocess.PIPE, stderr=err, text=True, cwd=layout.root)
        started = time.monotonic()
        deadline = started + seconds + extend_s + 180
        fed_until: float | None = None
        announced: set[str] = set()
        try:
            while query.poll() is None:
                now = time.monotonic()
                if now > deadline:
                    query.kill()
                    raise DemoError("the streaming query did not stop in time", help=f"see {log}")
                if fed_until is None and now > started + seconds and (
                        report.interleaved or now > started + seconds + extend_s):
                    stop.set()
                    fed_until = now
                if fed_until is not None and now > fed_until + 2 * trigger_s + 2:
                    stop_file.touch()  # the query takes the last landed batch, then stops between batches
                _progress(entry, after, announced, seen_compactions, api, asset_id, report, echo)
                time.sleep(1)
        finally:
            stop.set()
            feeder.join(timeout=30)
            stop_file.unlink(missing_ok=True)
        out = query.stdout.read() if query.stdout else ""
    report.stream_status = _status(out)
    if query.returncode != 0:
        raise DemoError(f"the streaming query failed (exit {query.returncode}, {report.stream_status})",
                        help=f"see {log}")
    _progress(entry, after, announced, seen_compactions, api, asset_id, report, echo)
    # The compaction DAG's last run (asset-triggered) finishes with the stream stopped.
    settle = time.monotonic() + settle_s
    while time.monotonic() < settle:
        table_now = open_table(entry.path)
        runs = api.get(f"/dags/{entry.dag_id('compaction')}/dagRuns", state=["queued", "running"])
        if not table_now.timeline.pending().filter(actions=[Action.COMPACTION]).instants and \
                not runs.get("dag_runs"):
            break
        _progress(entry, after, announced, seen_compactions, api, asset_id, report, echo)
        time.sleep(2)
    _progress(entry, after, announced, seen_compactions, api, asset_id, report, echo)
    report.landed = landed[0]
    final = open_table(entry.path)
    report.rows = final.read(columns=[demo.TABLE_OPTIONS["record_key"]]).num_rows
    report.model_equal, report.hudi_rs_equal = check_against_model(
        final, checkpoint_location(entry.path, entry.source.checkpoint, DEFAULT_IDENTIFIER))
    return report


def _progress(entry, after, announced, seen_compactions, api, asset_id, report: DemoReport, echo) -> None:
    try:
        table = open_table(entry.path)
    except TableNotFoundError:
        return
    for instant, batch in sink_commits(table, DEFAULT_IDENTIFIER, after=after):
        if instant in announced:
            continue
        announced.add(instant)
        report.streamed.append((instant, batch))
        stats = table.active.commit_metadata(table.timeline.get(instant)).write_stats()
        echo(f"  stream    batch {batch:>3} committed: delta commit {instant} "
             f"({sum(s.num_writes for s in stats)} records, {len(stats)} log/base files)")
        # What the ingest DAG's task does for its commits.
        api.post("/assets/events", {"asset_id": asset_id[0], "extra": {"instant": instant, "from": "make demo"}})
        due_now = compaction_due(table, due(entry).get("compaction", dict(entry.compaction_options)))
        if not due_now.due:
            continue
        if asset_id[1] is not None:  # the Asset that schedules the compaction DAG
            api.post("/assets/events", {"asset_id": asset_id[1], "extra": {"reason": due_now.reason, "from": "make demo"}})
        elif not api.get(f"/dags/{entry.dag_id('compaction')}/dagRuns", state=["queued", "running"]).get("dag_runs"):
            echo(f"  demo      {due_now.reason}: triggering {entry.dag_id('compaction')} (it runs on a cron)")
            api.trigger(entry.dag_id("compaction"))
    for c in _compactions(table):
        if c["instant"] not in seen_compactions:
            seen_compactions.add(c["instant"])
            report.compactions.append(c)
            echo(f"  airflow   {c['dag_id'] or 'compaction'} committed compaction {c['instant']} (run {c['run_id']})")


def _status(out: str) -> str:
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            return f"{doc.get('status')}: {len(doc.get('batches') or [])} batches, {doc.get('rows')} rows"
    return "no report"


@click.command()
@click.option("--seconds", type=float, default=90, show_default=True, help="how long the query streams at least (then until a compaction has committed, 180 s at most)")
@click.option("--every", type=float, default=4, show_default=True, help="seconds between landed batches")
@click.option("--table", default=None, help="the registry table (default: the first in mode: stream)")
@click.option("--port", type=int, default=lambda: int(os.environ.get("LAKEHOUSE_PORT", 8080)),
              show_default="8080 or $LAKEHOUSE_PORT")
def main(seconds: float, every: float, table: str | None, port: int) -> None:
    """A streaming query writes a table while Airflow's compaction DAG compacts it."""
    layout = plat.Layout(plat.ROOT, port)
    try:
        r = run(layout, seconds=seconds, every=every, table=table, echo=click.echo)
    except LakehouseError as e:
        click.echo(f"error: {e.message}\nHelp: {e.help}", err=True)
        raise SystemExit(1)
    click.echo(f"\n{r.landed} batches landed; the streaming query committed {len(r.streamed)} micro-batches "
               f"({r.stream_status}); the compaction DAG committed {len(r.compactions)} compaction(s)"
               f"{' while the stream kept writing' if r.interleaved else ''}.")
    click.echo(f"{r.table}: {r.rows} rows; equal to its history replayed with the Python API: "
               f"{'yes' if r.model_equal else 'NO'}; hudi-rs reads the same rows: "
               f"{'not installed' if r.hudi_rs_equal is None else 'yes' if r.hudi_rs_equal else 'NO'}.")
    click.echo(f"See it in Airflow: {layout.url} (Lakehouse menu, login {plat.USER} / {plat.password(layout)}); "
               "`make stop` stops the platform.")
    if not r.interleaved:
        click.echo("error: no compaction committed while the stream was writing, which is what the "
                   "demo shows\nHelp: run it longer (--seconds) or check the compaction DAG's runs in "
                   "Airflow", err=True)
    if not (r.model_equal and r.hudi_rs_equal is not False and r.interleaved):  # interleaved: a compaction ran
        raise SystemExit(1)


if __name__ == "__main__":
    main()
