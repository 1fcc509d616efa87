"""Settings of the clustering service (Hudi's HoodieClusteringConfig keys and defaults).

Clustering rewrites small file groups into fewer, larger ones, optionally sorted (linearly or by
a Z-order curve) so that readers skip files by value. lakehouse runs it as a table service
(``Table.cluster``, ``lakehouse clustering``, the Spark apps, Airflow), never inside a writer's
commit: Hudi's inline switches are refused rather than ignored.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Mapping

from lakehouse.config.options import (opt, parse_bool, parse_fields, parse_float_between, parse_int, parse_str,
                                      service_config)
from lakehouse.config.services import services_switch
from lakehouse.errors import ConfigError

MB = 1024 * 1024


class LayoutStrategy(enum.StrEnum):
    """``hoodie.layout.optimize.strategy``: how a sorted clustering orders rows."""

    LINEAR = "LINEAR"  # by the sort columns, the first most significant
    ZORDER = "ZORDER"  # by a Z-order curve over the sort columns: each column clusters alike
    HILBERT = "HILBERT"


class CurveBuildMethod(enum.StrEnum):
    """``hoodie.layout.optimize.curve.build.method``: how column values become curve coordinates."""

    DIRECT = "DIRECT"  # from the values themselves (order-preserving 64-bit keys)
    SAMPLE = "SAMPLE"  # from the values' ranks (Hudi samples boundaries; lakehouse ranks exactly)


class PartitionFilterMode(enum.StrEnum):
    """``hoodie.clustering.plan.partition.filter.mode``: which partitions a plan considers."""

    NONE = "NONE"
    RECENT_DAYS = "RECENT_DAYS"
    SELECTED_PARTITIONS = "SELECTED_PARTITIONS"
    DAY_ROLLING = "DAY_ROLLING"


def _layout(key: str, v: Any) -> LayoutStrategy:
    s = str(v).strip().upper().replace("-", "").replace("_", "")
    if s == "HILBERT":
        raise ConfigError(f"{key}=hilbert is not supported by lakehouse",
                          help=f"set {key} to z-order (it clusters every sort column too) or linear")
    for member in (LayoutStrategy.LINEAR, LayoutStrategy.ZORDER):
        if s == member.value:
            return member
    raise ConfigError(f"{key}={v!r} is not one of linear, z-order, hilbert",
                      help=f"set {key} to linear or z-order")


def _curve(key: str, v: Any) -> CurveBuildMethod:
    s = str(v).strip().upper()
    try:
        return CurveBuildMethod(s)
    except ValueError:
        raise ConfigError(f"{key}={v!r} is not one of DIRECT, SAMPLE",
                          help=f"set {key} to DIRECT or SAMPLE") from None


def _filter_mode(key: str, v: Any) -> PartitionFilterMode:
    s = str(v).strip().upper()
    if s == PartitionFilterMode.DAY_ROLLING:
        raise ConfigError(f"{key}=DAY_ROLLING is not supported by lakehouse",
                          help="use RECENT_DAYS or SELECTED_PARTITIONS, or schedule per partition "
                               "with hoodie.clustering.plan.strategy.partition.selected")
    try:
        return PartitionFilterMode(s)
    except ValueError:
        raise ConfigError(f"{key}={v!r} is not one of NONE, RECENT_DAYS, SELECTED_PARTITIONS",
                          help=f"set {key} to one of the listed values") from None


def _not_inline(key: str, v: Any) -> bool:
    if parse_bool(key, v):
        raise ConfigError(f"{key}=true: lakehouse does not cluster inside a writer's commit",
                          help="run clustering as a service: Table.cluster(), `lakehouse clustering "
                               "run`, the clustering-plan/clustering-execute Spark apps or the "
                               "Airflow clustering DAG")
    return False


def _regex(key: str, v: Any) -> str:
    s = parse_str(key, v)
    try:
        re.compile(s)
    except re.error as e:
        raise ConfigError(f"{key}={v!r} is not a regular expression: {e}",
                          help=f"set {key} to a valid regular expression") from None
    return s


@dataclass(frozen=True)
class ClusteringConfig:
    """When to schedule a clustering and what its plan holds (Hudi's size-based plan strategy,
    SparkSizeBasedClusteringPlanStrategy, and its sort-and-size execution)."""

    services_enabled: bool = services_switch()

    inline: bool = opt("hoodie.clustering.inline", False, _not_inline,
                       "refused when true: lakehouse clusters as a table service, not in a commit")
    schedule_inline: bool = opt("hoodie.clustering.schedule.inline", False, _not_inline,
                                "refused when true: lakehouse schedules clustering as a table service")
    max_commits: int = opt("hoodie.clustering.async.max.commits", 4, parse_int(1),
                           "completed commits since the last clustering that trigger one")
    small_file_limit: int = opt("hoodie.clustering.plan.strategy.small.file.limit", 300 * MB,
                                parse_int(0), "file slices whose base file is smaller are clustered")
    target_file_max_bytes: int = opt("hoodie.clustering.plan.strategy.target.file.max.bytes",
                                     1024 * MB, parse_int(1),
                                     "the size of the files a clustering writes")
    max_bytes_per_group: int = opt("hoodie.clustering.plan.strategy.max.bytes.per.group",
                                   2048 * MB, parse_int(1),
                                   "at most this many bytes of slices rewritten together")
    max_num_groups: int = opt("hoodie.clustering.plan.strategy.max.num.groups", 30, parse_int(1),
                              "at most this many groups in one plan")
    single_group_clustering: bool = opt(
        "hoodie.clustering.plan.strategy.single.group.clustering.enabled", True, parse_bool,
        "a group of one file slice is planned (lakehouse: only where it sorts or merges logs)")
    sort_columns: tuple[str, ...] = opt("hoodie.clustering.plan.strategy.sort.columns", (),
                                        parse_fields, "columns the rewritten files are sorted by")
    partition_selected: tuple[str, ...] = opt(
        "hoodie.clustering.plan.strategy.partition.selected", (), parse_fields,
        "only these partitions are clustered")
    partition_regex: str = opt("hoodie.clustering.plan.strategy.partition.regex.pattern", "", _regex,
                               "only partitions matching this regular expression are clustered")
    filter_mode: PartitionFilterMode = opt("hoodie.clustering.plan.partition.filter.mode",
                                           PartitionFilterMode.NONE, _filter_mode,
                                           "NONE, RECENT_DAYS (the newest partitions) or "
                                           "SELECTED_PARTITIONS (begin..end)")
    lookback_partitions: int = opt("hoodie.clustering.plan.strategy.daybased.lookback.partitions", 2,
                                   parse_int(1), "RECENT_DAYS: how many of the newest partitions")
    skip_latest_partitions: int = opt("hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions",
                                      0, parse_int(0), "RECENT_DAYS: newest partitions left out")
    begin_partition: str = opt("hoodie.clustering.plan.strategy.cluster.begin.partition", "", parse_str,
                               "SELECTED_PARTITIONS: the first partition (inclusive)")
    end_partition: str = opt("hoodie.clustering.plan.strategy.cluster.end.partition", "", parse_str,
                             "SELECTED_PARTITIONS: the last partition (inclusive)")
    layout: LayoutStrategy = opt("hoodie.layout.optimize.strategy", LayoutStrategy.LINEAR, _layout,
                                 "how sort columns order rows: linear or z-order")
    curve_build_method: CurveBuildMethod = opt("hoodie.layout.optimize.curve.build.method",
                                               CurveBuildMethod.DIRECT, _curve,
                                               "z-order coordinates from values (DIRECT) or ranks (SAMPLE)")
    # Consistent-hashing buckets (HoodieIndexConfig): a clustering of such a table splits and
    # merges buckets by size (BaseConsistentHashingBucketClusteringPlanStrategy).
    split_threshold: float = opt("hoodie.bucket.index.split.threshold", 2.0, parse_float_between(1.0, 1e6),
                                 "a bucket whose files pass this many times hoodie.parquet.max.file.size splits")
    merge_threshold: float = opt("hoodie.bucket.index.merge.threshold", 0.2, parse_float_between(0.0, 1.0),
                                 "neighbouring buckets under this share of hoodie.parquet.max.file.size merge")
    max_num_buckets: int | None = opt("hoodie.bucket.index.max.num.buckets", None, parse_int(1),
                                      "at most this many buckets per partition (unset: "
                                      "hoodie.bucket.index.num.buckets, as in Hudi: no split)")
    min_num_buckets: int | None = opt("hoodie.bucket.index.min.num.buckets", None, parse_int(1),
                                      "at least this many buckets per partition (unset: "
                                      "hoodie.bucket.index.num.buckets: no merge below it)")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "ClusteringConfig":
        return service_config(cls, options)

    def partitions(self, partitions: list[str]) -> list[str]:
        """The partitions a plan considers, of ``partitions`` (PartitionAwareClusteringPlanStrategy:
        the selected ones, or all filtered by the regex, then by the filter mode)."""
        out = sorted(partitions)
        if self.partition_selected:
            chosen = set(self.partition_selected)
            return [p for p in out if p in chosen]
        if self.partition_regex:
            rx = re.compile(self.partition_regex)
            out = [p for p in out if rx.fullmatch(p)]
        if self.filter_mode is PartitionFilterMode.RECENT_DAYS:
            newest = sorted(out, reverse=True)[self.skip_latest_partitions:]
            return sorted(newest[:self.lookback_partitions])
        if self.filter_mode is PartitionFilterMode.SELECTED_PARTITIONS:
            return [p for p in out if (not self.begin_partition or p >= self.begin_partition)
                    and (not self.end_partition or p <= self.end_partition)]
        return out
