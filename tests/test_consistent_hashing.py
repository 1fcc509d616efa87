"""Hudi's consistent-hashing metadata (HoodieConsistentHashingMetadata, ConsistentHashingNode,
ConsistentBucketIdentifier): the files hudi-common 0.14.1 wrote byte for byte, the ring lookup,
and the child nodes of splits and merges."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from lakehouse.consistent_hashing import (HASH_MASK, ConsistentHashingNode, HashingMetadata, NodeTag,
                                          child_nodes_json, hash_key_text, parse_child_nodes, record_hashes)
from lakehouse.errors import CorruptFileError
from tests.test_hash_id import reference_xxh32

# new HoodieConsistentHashingMetadata("2024/01/01", 4).toBytes(), hudi-common-0.14.1.jar.
HUDI_4 = """{
  "version" : 0,
  "partitionPath" : "2024/01/01",
  "instant" : "00000000000000",
  "numBuckets" : 4,
  "seqNo" : 0,
  "nodes" : [ {
    "value" : 536870912,
    "fileIdPrefix" : "1eb58b75-0259-331f-a0f0-4963fe7228fe",
    "tag" : "NORMAL"
  }, {
    "value" : 1073741824,
    "fileIdPrefix" : "6aa8b131-52a2-33a2-ab0a-1845c7711cd2",
    "tag" : "NORMAL"
  }, {
    "value" : 1610612736,
    "fileIdPrefix" : "c482fdfe-44fb-3a0d-a044-c18e37687356",
    "tag" : "NORMAL"
  }, {
    "value" : 2147483647,
    "fileIdPrefix" : "fcb4ecfc-7736-3784-a0af-373dea232423",
    "tag" : "NORMAL"
  } ]
}"""


def test_an_initial_ring_is_the_file_hudi_writes():
    m = HashingMetadata.initial("2024/01/01", 4)
    assert m.to_bytes().decode() == HUDI_4
    assert m.file_name == "00000000000000.hashing_meta"
    assert HashingMetadata.from_bytes(HUDI_4.encode(), "x") == m
    unpartitioned = HashingMetadata.initial("", 2)
    assert [(n.value, n.file_id_prefix) for n in unpartitioned.nodes] == [
        (1073741824, "a9ce6eae-46a4-38bf-9258-2a07d0a9b6bb"), (2147483647, "7615f770-1c61-323c-bfc4-d5a37c3f2e39")]
    assert unpartitioned.nodes[0].file_id == "a9ce6eae-46a4-38bf-9258-2a07d0a9b6bb-0"
    for n in (1, 3, 256):
        ring = HashingMetadata.initial("p", n)
        assert ring.bucket_count == n and ring.nodes[-1].value == HASH_MASK
    with pytest.raises(CorruptFileError, match="consistent-hashing"):
        HashingMetadata.from_bytes(b"[1]", "bad.hashing_meta")


def test_child_nodes_are_written_as_hudis_plans_carry_them():
    children = [ConsistentHashingNode(100, None, NodeTag.DELETE), ConsistentHashingNode(200, "pfx", NodeTag.REPLACE)]
    text = child_nodes_json(children)
    assert text == ('[ {\n  "value" : 100,\n  "fileIdPrefix" : null,\n  "tag" : "DELETE"\n}, {\n'
                    '  "value" : 200,\n  "fileIdPrefix" : "pfx",\n  "tag" : "REPLACE"\n} ]')
    assert parse_child_nodes(text) == tuple(children)


def test_a_hash_goes_to_the_first_node_at_or_above_it():
    ring = HashingMetadata.initial("p", 8)
    values = [n.value for n in ring.nodes]
    rnd = random.Random(1)
    hashes = np.array([0, 1, values[0], values[0] + 1, values[3], HASH_MASK] +
                      [rnd.randrange(0, HASH_MASK + 1) for _ in range(2000)], dtype=np.int64)
    got = ring.locate(hashes)
    for h, i in zip(hashes.tolist(), got.tolist()):
        assert i == next(k for k, v in enumerate(values) if v >= h)
    # A ring whose last node is below the top wraps to its first node (TreeMap.firstEntry).
    short = HashingMetadata("p", "1", 2, 0, (ConsistentHashingNode(10, "a"), ConsistentHashingNode(20, "b")))
    assert short.locate(np.array([5, 10, 15, 21, HASH_MASK])).tolist() == [0, 0, 1, 0, 0]


def test_a_split_halves_a_range_and_a_merge_joins_neighbours():
    ring = HashingMetadata.initial("p", 4)
    children = ring.split_children(2, ("new-a", "new-b"))
    lo, hi = ring.nodes[1].value, ring.nodes[2].value
    assert children == (ConsistentHashingNode((lo + hi) >> 1, "new-a", NodeTag.REPLACE),
                        ConsistentHashingNode(hi, "new-b", NodeTag.REPLACE))
    after = ring.with_children(children, "20260101000000000")
    assert after.bucket_count == 5 and after.seq_no == 1 and after.instant == "20260101000000000"
    assert after.num_buckets == 4 and all(n.tag is NodeTag.NORMAL for n in after.nodes)
    assert [n.value for n in after.nodes] == sorted(n.value for n in after.nodes)
    # The first node's range wraps from the last node's value: its midpoint wraps too.
    first = ring.split_children(0, ("x", "y"))
    assert first[0].value == ((ring.nodes[3].value + ring.nodes[0].value + HASH_MASK + 1) >> 1) & HASH_MASK
    tiny = HashingMetadata("p", "1", 2, 0, (ConsistentHashingNode(10, "a"), ConsistentHashingNode(11, "b")))
    assert tiny.split_children(1, ("x", "y")) is None
    merged = after.with_children(after.merge_children([2, 3], "m"), "20260101000000001")
    assert merged.bucket_count == 4 and merged.seq_no == 2
    assert merged.nodes[2] == ConsistentHashingNode(after.nodes[3].value, "m")
    with pytest.raises(ValueError, match="not ring neighbours"):
        after.merge_children([1, 3], "m")
    assert ring.merge_children([3, 0], "w")[-1].value == ring.nodes[0].value  # around the top


def test_records_hash_by_their_key_or_their_hash_fields():
    keys = pa.array(["k1", "uuid-000001", "id:7,n:__null__", "id:__empty__,n:3"])
    assert hash_key_text(keys, ("id", "n"), ("id", "n")).to_pylist() == ["k1", "uuid-000001", "7null", "3"]
    assert hash_key_text(keys, ("n",), ("id", "n")).to_pylist() == ["k1", "uuid-000001", "null", "3"]
    want = [reference_xxh32(t.encode()) & HASH_MASK for t in ["k1", "uuid-000001", "7null", "3"]]
    assert record_hashes(keys, ("id", "n"), ("id", "n")).tolist() == want


def test_the_ring_in_force_is_the_newest_of_a_completed_clustering(tmp_path):
    from lakehouse.consistent_hashing import committed_ring, ring_for_write
    from lakehouse.storage.local import LocalStorage

    storage = LocalStorage(str(tmp_path))
    completed = {"20260101000000001"}.__contains__
    assert committed_ring(storage, "p", completed) is None
    first = ring_for_write(storage, "p", 4, completed)
    assert first == HashingMetadata.initial("p", 4)
    folder = tmp_path / ".hoodie" / ".bucket_index" / "consistent_hashing_metadata" / "p"
    assert (folder / "00000000000000.hashing_meta").read_text() == first.to_bytes().decode()
    assert ring_for_write(storage, "p", 8, completed) == first  # the count is the first writer's
    split = first.with_children(first.split_children(1, ("s1", "s2")), "20260101000000001")
    (folder / split.file_name).write_bytes(split.to_bytes())
    pending = split.with_children(split.merge_children([0, 1], "m"), "20260101000000002")
    (folder / pending.file_name).write_bytes(pending.to_bytes())
    assert committed_ring(storage, "p", completed) == split  # the pending clustering's is passed over
    unpartitioned = ring_for_write(storage, "", 2, completed)
    assert (tmp_path / ".hoodie" / ".bucket_index" / "consistent_hashing_metadata" /
            "00000000000000.hashing_meta").exists() and unpartitioned.bucket_count == 2
