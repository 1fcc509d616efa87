"""The file-system view a write works on: listed under the timeline it was read with, so that
no file group seems empty to it while a compaction moves its slice."""

from __future__ import annotations

from lakehouse.errors import TimelineError
from lakehouse.file_group.view import FileSystemView, list_data_files
from lakehouse.storage.base import Storage
from lakehouse.timeline.active import ActiveTimeline, Timeline


def write_view(storage: Storage, active: ActiveTimeline, timeline: Timeline, partitions: list[str] | None = None, *,
               merge_on_read: bool) -> tuple[FileSystemView, Timeline]:
    """The file-system view a write looks keys up in and routes by (of ``partitions``, or
    of the whole table), with the timeline it was built on.

    A compaction pending on the write's ``timeline`` may have committed (and a clean then
    deleted its input slice) before the files were listed: the write would
    find those file groups empty and insert their keys a second time. The listing is then
    read with a timeline loaded just before it (every file of an instant completed there
    is listed), and taken again if a compaction completed while it was taken (its new base
    files may be missing from it: the write's logs would go to the replaced slice). No
    compaction is planned while this write is pending, so this ends.

    The view is checked against the completed commits (FileSystemView.verify): a file one
    names that is gone is a CorruptFileError (the write would drop its records); gone files
    that a newer commit and a clean explain (another writer's commit, since ``timeline``)
    make the listing be taken again with the newer timeline."""
    for _ in range(3):
        pending = {i.time for i in timeline.pending_compactions()}
        if not pending:
            # No compaction was pending at our instant, and one planned later does not
            # shape this write: no slice can move under the listing (a newer plan's files
            # are not visible to this write).
            files, still = list_data_files(storage, partitions), pending
        while pending:
            before = active.load()
            files = list_data_files(storage, partitions)
            still = {i.time for i in before.pending_compactions()}
            if still == {i.time for i in active.load().pending_compactions()}:
                break
        if pending - still:
            timeline = before
        view = FileSystemView(files, timeline, active, partitions=partitions)
        newer = view.verify(merge_on_read=merge_on_read)
        if newer is None:
            return view, timeline
        timeline = newer
    raise TimelineError("the table changed under the write 3 times in a row (files named by "
                        "its commits were cleaned or rolled back while it was listed)",
                        help="nothing of this write is visible; write the batch again")
