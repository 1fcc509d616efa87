"""Clustering: rewriting small file groups into fewer, larger ones, optionally sorted, in three
steps that share nothing but the timeline: schedule (plan), execute, commit."""

from lakehouse.services.clustering.commit import CommitResult, commit_clustering
from lakehouse.services.clustering.execute import ExecuteResult, execute_clustering, undo_execution
from lakehouse.services.clustering.plan import (ScheduleResult, require_clusterable, schedule_clustering)

__all__ = ["CommitResult", "ExecuteResult", "ScheduleResult", "commit_clustering", "execute_clustering",
           "require_clusterable", "schedule_clustering", "undo_execution"]
