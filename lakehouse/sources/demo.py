"""A built-in demo source: a realistic stream of taxi-trip changes, as files landing in a folder.

Each batch holds new trips, fare corrections of earlier trips (later event times), late
duplicates of earlier trips (older event times: they must lose under event-time ordering),
cancellations (``_hoodie_is_deleted``) and in-batch duplicates. Batches are deterministic in
(seed, batch number), so tests and the embedded platform can replay them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse.storage import get_storage

CITIES = ["san_francisco", "sao_paulo", "chennai", "new_york", "berlin", "lagos"]
SCHEMA = pa.schema([
    ("trip_id", pa.string()), ("city", pa.string()), ("event_ts", pa.int64()),
    ("rider", pa.string()), ("driver", pa.string()), ("fare", pa.float64()),
    ("tip", pa.float64()), ("distance_km", pa.float64()), ("_hoodie_is_deleted", pa.bool_()),
])
TABLE_OPTIONS = dict(record_key="trip_id", partition_by="city", ordering_field="event_ts",
                     merge_mode="EVENT_TIME_ORDERING")
BASE_TS = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms


@dataclass(frozen=True)
class DemoStream:
    seed: int = 7
    rows: int = 1000  # per batch
    update_fraction: float = 0.2
    late_fraction: float = 0.05
    delete_fraction: float = 0.02

    def _trip_city(self, n: int) -> np.ndarray:
        return np.array(CITIES)[np.arange(n) % len(CITIES)]

    def batch(self, number: int) -> pa.Table:
        """Batch ``number`` (0-based)."""
        rng = np.random.default_rng([self.seed, number])
        n_upd = int(self.rows * self.update_fraction) if number else 0
        n_late = int(self.rows * self.late_fraction) if number else 0
        n_del = int(self.rows * self.delete_fraction) if number else 0
        n_new = self.rows - n_upd - n_late - n_del
        earlier = number * self.rows  # trips of earlier batches: t<batch>-<i>, i < rows
        ids, cities, ts, deleted = [], [], [], []
        new_idx = np.arange(n_new)
        ids.append(np.char.add(f"t{number:05d}-", new_idx.astype(str)))
        cities.append(rng.choice(CITIES, n_new))
        ts.append(BASE_TS + number * 60_000 + rng.integers(0, 60_000, n_new))
        deleted.append(np.zeros(n_new, bool))
        for count, offset, is_delete in ((n_upd, 3_600_000, False), (n_late, -86_400_000, False),
                                         (n_del, 7_200_000, True)):
            if not count or not earlier:
                continue
            picks = rng.integers(0, earlier, count)
            b, i = picks // self.rows, picks % self.rows
            i = np.minimum(i, int(self.rows * (1 - self.update_fraction - self.late_fraction
                                               - self.delete_fraction)) - 1)
            ids.append(np.array([f"t{x:05d}-{y}" for x, y in zip(b, i)]))
            # A trip keeps its city: the city is drawn from the trip's own batch and index.
            cities.append(np.array([self._city_of(int(x), int(y)) for x, y in zip(b, i)]))
            ts.append(BASE_TS + number * 60_000 + offset + rng.integers(0, 60_000, count))
            deleted.append(np.full(count, is_delete))
        ids_a, ts_a = np.concatenate(ids), np.concatenate(ts)
        n = len(ids_a)
        return pa.table({
            "trip_id": ids_a, "city": np.concatenate(cities), "event_ts": ts_a,
            "rider": np.char.add("rider-", rng.integers(0, 5000, n).astype(str)),
            "driver": np.char.add("driver-", rng.integers(0, 800, n).astype(str)),
            "fare": np.round(rng.uniform(4, 120, n), 2), "tip": np.round(rng.uniform(0, 20, n), 2),
            "distance_km": np.round(rng.uniform(0.5, 40, n), 2),
            "_hoodie_is_deleted": np.concatenate(deleted),
        }, schema=SCHEMA)

    def _city_of(self, batch: int, i: int) -> str:
        rng = np.random.default_rng([self.seed, batch])
        n_new = self.rows - (int(self.rows * self.update_fraction) + int(self.rows * self.late_fraction)
                             + int(self.rows * self.delete_fraction) if batch else 0)
        return str(rng.choice(CITIES, n_new)[min(i, n_new - 1)])


def write_batches(directory: str, count: int, stream: DemoStream | None = None,
                  fmt: str = "parquet") -> list[str]:
    """Land the next ``count`` batches in ``directory`` (numbering continues after the files
    already there); returns their paths."""
    stream = stream or DemoStream()
    storage = get_storage(directory)
    storage.mkdirs("")
    existing = [i.name for i in storage.list("") if i.name.startswith("batch-")]
    start = 1 + max((int(n[6:12]) for n in existing), default=-1)
    paths = []
    for k in range(start, start + count):
        table = stream.batch(k)
        name = f"batch-{k:06d}.{ 'parquet' if fmt == 'parquet' else 'jsonl'}"
        path = os.path.join(storage.root if hasattr(storage, "root") else directory, name)
        tmp = path + ".tmp"
        if fmt == "parquet":
            pq.write_table(table, tmp)
        else:
            with open(tmp, "w") as f:
                for row in table.to_pylist():
                    f.write(json.dumps(row) + "\n")
        os.replace(tmp, path)  # lands whole: a reader never sees half a batch
        paths.append(path)
    return paths
