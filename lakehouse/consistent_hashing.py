"""Hudi's consistent-hashing bucket index metadata (RFC-42): a partition's hash ring.

A ring is a sorted list of nodes over hash values [0, 2^31-1]; each node owns the values from its
predecessor's (exclusive) up to its own (inclusive) and names the file group that holds them
(``fileIdPrefix + "-0"``). A record's hash is XXH32 of its hash keys (:mod:`lakehouse.hash_id`)
masked to 31 bits; its node is the first whose value is at or above it
(``ConsistentBucketIdentifier.getBucket``). Clustering resizes a ring: a split replaces a node by
two (the new one at the midpoint), a merge deletes all but the last of a run of neighbours; the
plan carries the changes as *child nodes* (REPLACE / DELETE), and the clustering writes the
resulting ring as the partition's next metadata file.

The files are Hudi's (``HoodieConsistentHashingMetadata``): JSON written by Jackson's default
pretty printer, in ``.hoodie/.bucket_index/consistent_hashing_metadata/<partition>/``, named
``<instant>.hashing_meta``; a partition's first ring is at instant ``00000000000000`` with
deterministic file-id prefixes (an MD5 name UUID of the node's range and the partition), so
concurrent creators write identical files.
"""

from __future__ import annotations

import enum
import hashlib
import json
import struct
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse import layout
from lakehouse.bucket_identifier import hash_columns
from lakehouse.errors import CorruptFileError
from lakehouse.hash_id import xxhash32

if TYPE_CHECKING:
    from lakehouse.storage.base import Storage

HASH_MASK = 0x7FFFFFFF  # Integer.MAX_VALUE
INIT_INSTANT = "00000000000000"  # HoodieTimeline.INIT_INSTANT_TS
FILE_SUFFIX = ".hashing_meta"


class NodeTag(enum.StrEnum):
    NORMAL = "NORMAL"
    REPLACE = "REPLACE"
    DELETE = "DELETE"


@dataclass(frozen=True)
class ConsistentHashingNode:
    value: int
    file_id_prefix: str | None
    tag: NodeTag = NodeTag.NORMAL

    @property
    def file_id(self) -> str:
        """The node's file group (``FSUtils.createNewFileId(prefix, 0)``)."""
        return f"{self.file_id_prefix}-0"

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "fileIdPrefix": self.file_id_prefix, "tag": self.tag.value}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ConsistentHashingNode":
        return cls(int(d["value"]), d.get("fileIdPrefix"), NodeTag(d.get("tag") or "NORMAL"))


def _jackson_nodes(nodes: Sequence[ConsistentHashingNode], indent: str) -> str:
    """A node array as Jackson's DefaultPrettyPrinter writes it (objects' fields indented two
    more than ``indent``)."""
    if not nodes:
        return "[ ]"
    inner = indent + "  "
    parts = []
    for n in nodes:
        fields = [f'{inner}"{k}" : {json.dumps(v)}' for k, v in n.to_json().items()]
        parts.append("{\n" + ",\n".join(fields) + "\n" + indent + "}")
    return "[ " + ", ".join(parts) + " ]"


def child_nodes_json(nodes: Sequence[ConsistentHashingNode]) -> str:
    """The child nodes as a clustering plan's group carries them (``clustering.group.child.node``,
    ``ConsistentHashingNode.toJsonString``)."""
    return _jackson_nodes(nodes, "")


def parse_child_nodes(text: str) -> tuple[ConsistentHashingNode, ...]:
    return tuple(ConsistentHashingNode.from_json(d) for d in json.loads(text))


def initial_prefix(start: int, end: int, partition: str) -> str:
    """The file-id prefix of the initial node covering (start, end]: Java's
    ``UUID.nameUUIDFromBytes(long start ++ long end ++ utf8(partition))``."""
    digest = hashlib.md5(struct.pack(">qq", start, end) + partition.encode()).digest()
    return str(uuid.UUID(bytes=digest, version=3))


@dataclass(frozen=True)
class HashingMetadata:
    """``HoodieConsistentHashingMetadata``: one partition's ring as of ``instant``."""

    partition_path: str
    instant: str
    num_buckets: int  # the initial count (kept by rewrites); the current one is len(nodes)
    seq_no: int
    nodes: tuple[ConsistentHashingNode, ...]
    version: int = 0

    @classmethod
    def initial(cls, partition: str, num_buckets: int) -> "HashingMetadata":
        """A partition's first ring: ``num_buckets`` equal ranges, deterministic prefixes."""
        if num_buckets < 1:
            raise ValueError("a ring needs at least one bucket")
        step = (HASH_MASK + num_buckets - 1) // num_buckets
        nodes, start = [], 0
        for i in range(1, num_buckets + 1):
            end = min(step * i, HASH_MASK)
            nodes.append(ConsistentHashingNode(end, initial_prefix(start, end, partition)))
            start = end
        return cls(partition, INIT_INSTANT, num_buckets, 0, tuple(nodes))

    @property
    def file_name(self) -> str:
        return f"{self.instant}{FILE_SUFFIX}"

    @property
    def bucket_count(self) -> int:
        return len(self.nodes)

    def to_bytes(self) -> bytes:
        head = (f'{{\n  "version" : {self.version},\n  "partitionPath" : {json.dumps(self.partition_path)},\n'
                f'  "instant" : {json.dumps(self.instant)},\n  "numBuckets" : {self.num_buckets},\n'
                f'  "seqNo" : {self.seq_no},\n  "nodes" : {_jackson_nodes(self.nodes, "  ")}\n}}')
        return head.encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> "HashingMetadata":
        try:
            d = json.loads(data or b"{}")
            return cls(d.get("partitionPath") or "", d["instant"], int(d["numBuckets"]), int(d.get("seqNo", 0)),
                       tuple(ConsistentHashingNode.from_json(n) for n in d.get("nodes") or ()),
                       int(d.get("version", 0)))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptFileError(where, f"not a consistent-hashing metadata file ({e})") from None

    def values(self) -> np.ndarray:
        return np.fromiter((n.value for n in self.nodes), dtype=np.int64, count=len(self.nodes))

    def locate(self, hashes: np.ndarray) -> np.ndarray:
        """The node index of each hash (uint32 or int, masked to 31 bits here): the first node at
        or above it, wrapping to the first (``TreeMap.ceilingEntry``, else ``firstEntry``)."""
        h = np.asarray(hashes).astype(np.int64) & HASH_MASK
        idx = np.searchsorted(self.values(), h, side="left")
        idx[idx == len(self.nodes)] = 0
        return idx

    def with_children(self, children: Iterable[ConsistentHashingNode], instant: str) -> "HashingMetadata":
        """The ring after a clustering's child nodes (``ConsistentBucketIdentifier`` applying
        them; every node NORMAL again), as the clustering at ``instant`` writes it."""
        ring = {n.value: n for n in self.nodes}
        for c in children:
            if c.tag is NodeTag.REPLACE:
                ring[c.value] = ConsistentHashingNode(c.value, c.file_id_prefix)
            elif c.tag is NodeTag.DELETE:
                ring.pop(c.value, None)
            else:
                raise ValueError(f"a child node must be REPLACE or DELETE, not {c.tag}")
        nodes = tuple(ring[v] for v in sorted(ring))
        return replace(self, instant=instant, seq_no=self.seq_no + 1, nodes=nodes)

    def renewed(self, instant: str, prefix: Callable[[], str]) -> "HashingMetadata":
        """The ring with the same nodes over new file groups, as of ``instant``: what a write that
        replaces every file group of the partition (insert_overwrite, delete_partition) leaves,
        so that no later write reuses a replaced file group's id."""
        nodes = tuple(ConsistentHashingNode(n.value, prefix()) for n in self.nodes)
        return replace(self, instant=instant, seq_no=self.seq_no + 1, nodes=nodes)

    def split_children(self, index: int, new_prefixes: Sequence[str]) -> tuple[ConsistentHashingNode, ...] | None:
        """Child nodes splitting node ``index`` into ``len(new_prefixes)`` equal ranges (two: at
        the middle of its range, as ``ConsistentBucketIdentifier.splitBucket``), or None when its
        range is too narrow."""
        k = len(new_prefixes)
        b = self.nodes[index]
        a = self.nodes[index - 1] if len(self.nodes) > 1 else b
        wrap = 0 if a.value < b.value else HASH_MASK + 1
        width = b.value + wrap - a.value
        if k < 2 or width < k:
            return None
        points = [((a.value + width * j // k) & HASH_MASK) for j in range(1, k)] + [b.value]
        return tuple(ConsistentHashingNode(v, p, NodeTag.REPLACE) for v, p in zip(points, new_prefixes))

    def merge_children(self, indices: Sequence[int], new_prefix: str) -> tuple[ConsistentHashingNode, ...]:
        """Child nodes merging the ring neighbours ``indices`` (in ring order) into one node."""
        n = len(self.nodes)
        for x, y in zip(indices, indices[1:]):
            if (x + 1) % n != y:
                raise ValueError(f"nodes {x} and {y} are not ring neighbours")
        last = self.nodes[indices[-1]]
        return (*(ConsistentHashingNode(self.nodes[i].value, None, NodeTag.DELETE) for i in indices[:-1]),
                ConsistentHashingNode(last.value, new_prefix, NodeTag.REPLACE))


def hash_key_text(record_keys: pa.Array | pa.ChunkedArray, hash_fields: tuple[str, ...],
                  key_fields: tuple[str, ...]) -> pa.Array:
    """What Hudi hashes for each record key (``BucketIdentifier.getHashKeys`` joined with ""): the
    key itself when it holds no ``:``; else the values of the hash fields parsed from the
    complex key (``f1:v1,f2:v2``), in key order, ``__null__`` as the text "null"."""
    if isinstance(record_keys, pa.ChunkedArray):
        record_keys = record_keys.combine_chunks()
    keys = record_keys.cast(pa.string())
    complex_ = pc.match_substring(keys, ":")
    if not pc.any(complex_).as_py():
        return keys
    parts = hash_columns(pa.table({}), pa.chunked_array([keys]), hash_fields, key_fields, True)
    parts = [pc.fill_null(p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p, "null") for p in parts]
    joined = pc.binary_join_element_wise(*parts, "") if len(parts) > 1 else parts[0]
    return pc.if_else(complex_, joined, keys)


def record_hashes(record_keys: pa.Array | pa.ChunkedArray, hash_fields: tuple[str, ...],
                  key_fields: tuple[str, ...]) -> np.ndarray:
    """Each record's 31-bit hash on the ring (``ConsistentBucketIdentifier.getBucket``)."""
    return (xxhash32(hash_key_text(record_keys, hash_fields, key_fields)).astype(np.int64) & HASH_MASK)


def committed_ring(storage: "Storage", partition: str, completed: Callable[[str], bool]) -> HashingMetadata | None:
    """The partition's ring in force: its newest metadata file whose instant is the initial one
    or a completed clustering (``completed(instant)``), as Hudi's
    ``ConsistentBucketIndexUtils.loadMetadata`` settles it; None when the partition has none.
    A pending clustering's file, or one a rolled-back clustering left, is passed over."""
    folder = layout.hashing_metadata_folder(partition)
    names = sorted(i.name for i in storage.list(folder) if not i.is_dir and i.name.endswith(FILE_SUFFIX))
    for name in reversed(names):
        instant = name[:-len(FILE_SUFFIX)]
        if instant == INIT_INSTANT or completed(instant):
            path = f"{folder}/{name}"
            return HashingMetadata.from_bytes(storage.read(path), storage.uri(path))
    return None


def ring_committed(timeline) -> Callable[[str], bool]:
    """Whether a ring file's instant is committed, on ``timeline``: a completed instant, or one
    older than the active timeline (archived: archival moves only completed instants, and a
    rolled-back clustering's ring file is deleted with it)."""
    first = timeline.first
    return lambda t: timeline.is_completed(t) or (first is not None and t < first.time)


def ring_for_write(storage: "Storage", partition: str, num_buckets: int,
                   completed: Callable[[str], bool]) -> HashingMetadata:
    """The partition's ring, created with ``num_buckets`` equal ranges if it has none (Hudi's
    ``loadOrCreateMetadata``; concurrent creators write the same bytes, so the create that
    loses finds the winner's file identical)."""
    ring = committed_ring(storage, partition, completed)
    if ring is not None:
        return ring
    ring = HashingMetadata.initial(partition, num_buckets)
    path = f"{layout.hashing_metadata_folder(partition)}/{ring.file_name}"
    try:
        storage.create(path, ring.to_bytes())
    except FileExistsError:
        return HashingMetadata.from_bytes(storage.read(path), storage.uri(path))
    return ring


def write_rings(storage: "Storage", rings: Mapping[str, HashingMetadata]) -> None:
    """Each partition's next ring, ``<instant>.hashing_meta`` (in force once that instant
    completes; written again by a step run again: the same inputs give the same bytes)."""
    for p, ring in rings.items():
        storage.write(f"{layout.hashing_metadata_folder(p)}/{ring.file_name}", ring.to_bytes())


def delete_rings_of(storage: "Storage", instant: str) -> list[str]:
    """Delete the ring files ``instant`` wrote (a clustering rolled back); returns their paths."""
    name = f"{instant}{FILE_SUFFIX}"
    gone = [i.path for i in storage.list(layout.HASHING_METADATA, recursive=True)
            if not i.is_dir and i.name == name]
    for path in gone:
        storage.delete(path)
    return gone
