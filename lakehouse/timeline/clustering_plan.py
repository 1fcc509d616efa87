"""``HoodieClusteringPlan``: what a scheduled clustering rewrites, the content of
``<t>.replacecommit.requested`` (inside a ``HoodieRequestedReplaceMetadata`` whose
``operationType`` is ``CLUSTER``).

A plan is a list of groups; each group is a set of file slices whose records are rewritten
together into ``numOutputFileGroups`` new file groups. As Hudi's ClusteringPlanStrategy writes
them, a slice names its base file and log files by their full paths (Hudi's executor opens them
so); lakehouse's executor takes only their names, joined to the slice's partition, so a plan
still runs after the table was moved.

A replacecommit is a clustering only if its requested file says so
(``ClusteringUtils.getClusteringPlan``): insert_overwrite's replace commits hold no plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from lakehouse.errors import CorruptFileError
from lakehouse.timeline.avro_files import AvroModel, RequestedReplaceMetadata

# HoodieRequestedReplaceMetadata.operationType of a clustering (WriteOperationType.CLUSTER).
CLUSTER = "CLUSTER"
# Hudi's size-based execution strategy: what a Java executor of the plan runs.
SORT_AND_SIZE_STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
SORT_COLUMNS_PARAM = "hoodie.clustering.plan.strategy.sort.columns"
# A consistent-hashing table's clustering (BaseConsistentHashingBucketClusteringPlanStrategy):
# its groups carry the ring's new nodes, and Java runs it with this execution strategy.
CONSISTENT_BUCKET_STRATEGY = ("org.apache.hudi.client.clustering.run.strategy."
                              "SparkConsistentBucketClusteringExecutionStrategy")
GROUP_PARTITION_KEY = "clustering.group.partition"
GROUP_CHILD_NODE_KEY = "clustering.group.child.node"
GROUP_SEQUENCE_NO_KEY = "clustering.group.sequence.no"


def _name(path: str | None) -> str | None:
    """A plan's file path (Hudi writes full paths; "" for none) as the file's name."""
    if not path:
        return None
    return path.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class SliceInfo(AvroModel):
    """``HoodieSliceInfo``: one file slice of a group."""

    partition_path: str
    file_id: str
    data_file_path: str = ""  # the base file's full path; "" when the slice has only logs
    delta_file_paths: tuple[str, ...] = ()
    bootstrap_file_path: str = ""
    version: int = 1

    @property
    def base_file_name(self) -> str | None:
        return _name(self.data_file_path)

    @property
    def log_file_names(self) -> tuple[str, ...]:
        return tuple(n for n in (_name(p) for p in self.delta_file_paths) if n)

    @property
    def file_group(self) -> tuple[str, str]:
        return (self.partition_path, self.file_id)

    def to_avro(self) -> dict[str, Any]:
        return {"dataFilePath": self.data_file_path, "deltaFilePaths": list(self.delta_file_paths),
                "fileId": self.file_id, "partitionPath": self.partition_path,
                "bootstrapFilePath": self.bootstrap_file_path, "version": self.version}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        if r.get("fileId") is None:
            raise ValueError("a slice of the plan has no fileId")
        return cls(r.get("partitionPath") or "", r["fileId"], r.get("dataFilePath") or "",
                   tuple(r.get("deltaFilePaths") or ()), r.get("bootstrapFilePath") or "",
                   r.get("version") or 1)


@dataclass(frozen=True, slots=True)
class ClusteringGroup(AvroModel):
    """``HoodieClusteringGroup``: slices rewritten together into ``num_output_file_groups``."""

    slices: tuple[SliceInfo, ...]
    metrics: Mapping[str, float] = field(default_factory=dict)
    num_output_file_groups: int = 1
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    version: int = 1

    @property
    def partition(self) -> str:
        return self.slices[0].partition_path if self.slices else ""

    @property
    def resizes_buckets(self) -> bool:
        """Whether the group rewrites consistent-hashing buckets into the ring nodes it carries."""
        return GROUP_CHILD_NODE_KEY in self.extra_metadata

    def to_avro(self) -> dict[str, Any]:
        return {"slices": [s.to_avro() for s in self.slices], "metrics": dict(self.metrics),
                "numOutputFileGroups": self.num_output_file_groups,
                "extraMetadata": dict(self.extra_metadata), "version": self.version}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(tuple(SliceInfo.from_avro(s) for s in r.get("slices") or ()),
                   dict(r.get("metrics") or {}), r.get("numOutputFileGroups") or 1,
                   dict(r.get("extraMetadata") or {}), r.get("version") or 1)


@dataclass(frozen=True, slots=True)
class ClusteringStrategy(AvroModel):
    """``HoodieClusteringStrategy``: the execution strategy's class and its parameters."""

    strategy_class_name: str = SORT_AND_SIZE_STRATEGY
    strategy_params: Mapping[str, str] = field(default_factory=dict)
    version: int = 1

    def to_avro(self) -> dict[str, Any]:
        return {"strategyClassName": self.strategy_class_name,
                "strategyParams": dict(self.strategy_params), "version": self.version}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r.get("strategyClassName") or "", dict(r.get("strategyParams") or {}),
                   r.get("version") or 1)


@dataclass(frozen=True, slots=True)
class ClusteringPlan(AvroModel):
    """``HoodieClusteringPlan``."""

    input_groups: tuple[ClusteringGroup, ...]
    strategy: ClusteringStrategy = field(default_factory=ClusteringStrategy)
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    version: int = 1
    # Hudi 0.14/0.15 always plan with true: rows keep their commit time and sequence number.
    preserve_hoodie_metadata: bool = True

    @property
    def slices(self) -> tuple[SliceInfo, ...]:
        return tuple(s for g in self.input_groups for s in g.slices)

    @property
    def file_groups(self) -> frozenset[tuple[str, str]]:
        return frozenset(s.file_group for s in self.slices)

    @property
    def sort_columns(self) -> tuple[str, ...]:
        raw = self.strategy.strategy_params.get(SORT_COLUMNS_PARAM, "")
        return tuple(c.strip() for c in raw.split(",") if c.strip())

    def to_avro(self) -> dict[str, Any]:
        return {"inputGroups": [g.to_avro() for g in self.input_groups],
                "strategy": self.strategy.to_avro(), "extraMetadata": dict(self.extra_metadata),
                "version": self.version, "preserveHoodieMetadata": self.preserve_hoodie_metadata}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        strategy = r.get("strategy")
        return cls(tuple(ClusteringGroup.from_avro(g) for g in r.get("inputGroups") or ()),
                   ClusteringStrategy.from_avro(strategy) if strategy else ClusteringStrategy(""),
                   dict(r.get("extraMetadata") or {}), r.get("version") or 1,
                   bool(r.get("preserveHoodieMetadata")))

    def to_requested_bytes(self, extra_metadata: Mapping[str, str] | None = None) -> bytes:
        """The ``<t>.replacecommit.requested`` file of this plan."""
        return RequestedReplaceMetadata(operation_type=CLUSTER, clustering_plan=self.to_avro(),
                                        extra_metadata=dict(extra_metadata or {})).to_bytes()


def clustering_plan_of(requested: bytes, path: str) -> ClusteringPlan | None:
    """The plan in a ``<t>.replacecommit.requested`` file, or None when it is not a clustering's
    (empty, as insert_overwrite may leave it, or another operation's)."""
    if not requested:
        return None
    meta = RequestedReplaceMetadata.from_bytes(requested, path)
    if meta.operation_type != CLUSTER or meta.clustering_plan is None:
        return None
    try:
        return ClusteringPlan.from_avro(meta.clustering_plan)
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptFileError(path, f"its clustering plan lacks a value lakehouse needs: {e}") from e
