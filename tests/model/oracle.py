"""An in-memory model of a Hudi table's logical content, independent of any file format.

It applies each committed operation to a dict ``key -> (row, commit time)`` by the merge mode's
rules, written plainly (one record at a time) so it shares nothing with the vectorised code.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field


@dataclass
class Oracle:
    mode: str  # COMMIT_TIME_ORDERING | EVENT_TIME_ORDERING | PARTIAL_UPDATE
    key: str
    ordering: str | None
    state: dict = field(default_factory=dict)  # key -> (row, commit_time)
    history: list = field(default_factory=list)  # (commit_time, snapshot of state)

    def _wins(self, new: dict, old: dict) -> bool:
        if self.mode == "COMMIT_TIME_ORDERING":
            return True
        return new[self.ordering] >= old[self.ordering]

    def _wins_in_batch(self, new: dict, old: dict) -> bool:
        """Within one batch commit-time ordering still compares ordering values
        (OverwriteWithLatestAvroPayload.preCombine: the greater wins, a tie goes to the later)."""
        if self.mode == "COMMIT_TIME_ORDERING":
            if self.ordering and new.get(self.ordering) is not None and old.get(self.ordering) is not None:
                return new[self.ordering] >= old[self.ordering]
            return True
        return self._wins(new, old)

    @staticmethod
    def _fill(winner: dict, loser: dict) -> dict:
        return {k: (loser.get(k) if v is None else v) for k, v in winner.items()}

    def _combine(self, old: tuple | None, new: dict, t: str) -> tuple | None:
        """Merge one incoming record (maybe a soft delete) into the stored version."""
        deleted = bool(new.get("_hoodie_is_deleted"))
        if old is None:
            return None if deleted else (new, t)
        old_row, old_t = old
        if self._wins(new, old_row):
            if deleted:
                return None
            row = self._fill(new, old_row) if self.mode == "PARTIAL_UPDATE" else new
            return (row, t)
        if self.mode == "PARTIAL_UPDATE" and not deleted:
            # PartialUpdateAvroPayload.mergeDisorderRecordsWithMetadata: the stored fields win,
            # the meta fields (the commit time) are the arriving record's.
            return (self._fill(old_row, new), t)
        return old

    def precombine(self, rows: list[dict]) -> list[dict]:
        by_key: dict = {}
        order: list = []
        for r in rows:
            k = r[self.key]
            if k not in by_key:
                by_key[k] = r
                order.append(k)
                continue
            cur = by_key[k]
            if self._wins_in_batch(r, cur):
                by_key[k] = self._fill(r, cur) if self.mode == "PARTIAL_UPDATE" else r
            elif self.mode == "PARTIAL_UPDATE":
                by_key[k] = self._fill(cur, r)
        return [by_key[k] for k in order]

    def upsert(self, rows: list[dict], t: str) -> None:
        for r in self.precombine(rows):
            k = r[self.key]
            res = self._combine(self.state.get(k), r, t)
            if res is None:
                self.state.pop(k, None)
            else:
                self.state[k] = res
        self._record(t)

    def delete(self, keys: list, t: str) -> None:
        for k in keys:
            self.state.pop(k, None)
        self._record(t)

    def _record(self, t: str) -> None:
        self.history.append((t, copy.deepcopy(self.state)))

    def rows(self, as_of: str | None = None, columns: list[str] | None = None) -> list[dict]:
        state = self.state
        if as_of is not None:
            state = {}
            for t, s in self.history:
                if t <= as_of:
                    state = s
        out = []
        for row, t in state.values():
            r = {k: v for k, v in row.items() if k != "_hoodie_is_deleted"}
            r["_hoodie_commit_time"] = t
            out.append({c: r.get(c) for c in columns} if columns else r)
        return sorted(out, key=lambda r: str(r[self.key]))

    def changes(self, start: str, end: str | None, columns: list[str]) -> list[dict]:
        rows = self.rows(end, columns + ["_hoodie_commit_time"] if "_hoodie_commit_time" not in columns else columns)
        return [{c: r[c] for c in columns} for r in rows
                if r["_hoodie_commit_time"] > start and (end is None or r["_hoodie_commit_time"] <= end)]
