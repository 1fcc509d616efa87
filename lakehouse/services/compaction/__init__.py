"""Compaction of Merge-On-Read tables in three steps that share nothing but the timeline:
schedule (plan), execute, commit."""

from lakehouse.services.compaction.commit import CommitResult, commit_compaction
from lakehouse.services.compaction.execute import ExecuteResult, execute_compaction, undo_execution
from lakehouse.services.compaction.plan import ScheduleResult, read_plan, require_mor, schedule_compaction

__all__ = ["CommitResult", "ExecuteResult", "ScheduleResult", "commit_compaction",
           "execute_compaction", "read_plan", "require_mor", "schedule_compaction", "undo_execution"]
