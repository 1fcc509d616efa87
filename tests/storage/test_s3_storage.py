"""The storage contract, run on local storage and on S3 (moto's server on 127.0.0.1), plus what
only S3 has: conditional puts and their lost answers, multipart uploads, options and buckets.

Checks read the S3 server through a separate boto3 client, not through the storage under test."""

from __future__ import annotations

import io
import pickle
import socket
import sys
import threading

import boto3
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from lakehouse.errors import (ConfigError, CorruptFileError, FileAlreadyExistsError, StorageError, UnsafePathError,
                              StorageOutcomeUnknownError)
from lakehouse.read.file_slice_reader import read_base_file
from lakehouse.storage import LocalStorage, get_storage
from lakehouse.storage import s3_conditional
from lakehouse.storage.s3 import S3Storage
from lakehouse.storage.s3_client import S3Settings
from lakehouse.storage.s3_conditional import TOKEN_METADATA_KEY
from lakehouse.storage.s3_output import S3Output
from tests.conftest import S3_TEST_CREDENTIALS


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return LocalStorage(str(tmp_path / "base"))
    return get_storage(request.getfixturevalue("s3_uri"), request.getfixturevalue("s3_options"))


@pytest.fixture
def s3(s3_uri, s3_options) -> S3Storage:
    s = get_storage(s3_uri, s3_options)
    assert isinstance(s, S3Storage)
    return s


@pytest.fixture
def raw(s3_server):
    """An independent client on the same server."""
    return boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def no_backoff(monkeypatch):
    monkeypatch.setattr(s3_conditional, "_BASE_DELAY", 0.0)


def _keys(raw, s: S3Storage) -> set[str]:
    pages = raw.get_paginator("list_objects_v2").paginate(Bucket=s.bucket, Prefix=s.prefix + "/")
    return {o["Key"][len(s.prefix) + 1:] for p in pages for o in p.get("Contents", ())}


# --- the contract, on both --------------------------------------------------------------------


def test_write_replaces_and_reads_back(store):
    store.write("w/f", b"one")
    store.write("w/f", b"two!")
    assert store.read("w/f") == b"two!"
    assert store.read_range("w/f", 1, 2) == b"wo"
    assert store.read_range("w/f", 2, 10) == b"o!"  # short at the end
    assert store.read_range("w/f", 10, 3) == b""  # past the end
    assert store.read_range("w/f", 0, 0) == b""
    with pytest.raises(FileNotFoundError):
        store.read("w/missing")


def test_create_refuses_an_existing_file(store):
    store.create("c/f", b"first")
    with pytest.raises(FileAlreadyExistsError) as err:
        store.create("c/f", b"second")
    assert isinstance(err.value, FileExistsError) and "Help:" in str(err.value)
    assert store.read("c/f") == b"first"
    store.create("c/empty", b"")
    assert store.read("c/empty") == b""
    store.touch("c/f")  # touching keeps the content
    store.touch("c/marker")
    assert store.read("c/f") == b"first" and store.read("c/marker") == b""
    assert store.atomic_create


def test_create_race_between_threads_has_exactly_one_winner(store):
    n, size = 8, 64 * 1024
    barrier = threading.Barrier(n)
    outcomes: dict[int, str] = {}

    def run(i: int) -> None:
        barrier.wait()
        try:
            store.create("race/target", bytes([i + 1]) * size)
            outcomes[i] = "won"
        except FileAlreadyExistsError:
            outcomes[i] = "lost"
        except Exception as e:  # pragma: no cover - shown by the assertion
            outcomes[i] = repr(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, o in outcomes.items() if o == "won"]
    assert len(winners) == 1 and sorted(outcomes.values()) == ["lost"] * (n - 1) + ["won"], outcomes
    assert store.read("race/target") == bytes([winners[0] + 1]) * size
    assert [i.path for i in store.list("race")] == ["race/target"]


def test_listing(store):
    assert store.list("no/such/dir") == [] and store.list("no/such", recursive=True) == []
    store.write("p/a.txt", b"12345")
    store.write("p/q/b.txt", b"1")
    store.write("p/q/r/c.txt", b"")
    store.write("top", b"")
    store.write("pp/x", b"")  # shares a name prefix with p: must not show up under p
    flat = {i.path: i for i in store.list("p")}
    assert set(flat) == {"p/a.txt", "p/q"}
    assert flat["p/a.txt"].size == 5 and not flat["p/a.txt"].is_dir
    assert flat["p/a.txt"].name == "a.txt" and flat["p/a.txt"].mtime_ns
    assert flat["p/q"].is_dir
    deep = {i.path: i.is_dir for i in store.list("p", recursive=True)}
    assert deep == {"p/a.txt": False, "p/q": True, "p/q/b.txt": False, "p/q/r": True,
                    "p/q/r/c.txt": False}
    assert {i.path for i in store.list("")} == {"p", "pp", "top"}
    assert {i.path for i in store.list("p/q/")} == {"p/q/b.txt", "p/q/r"}


@pytest.mark.parametrize("path", ["/p/a.txt", "p//a.txt", "./p/a.txt", "p/./a.txt", "p/../p/a.txt",
                                  "..", "../outside", "p/a.txt\x00"])
def test_a_path_leaving_the_root_or_not_canonical_is_refused(store, path):
    """lakehouse.storage.paths: a path is refused, not normalised (a commit that records './f'
    while the store writes 'f' deletes its own file as unlisted); nothing is read or written."""
    store.write("p/a.txt", b"hello")
    before = {i.path: i.size for i in store.list("", recursive=True)}
    for call in (lambda: store.write(path, b"x"), lambda: store.create(path, b"x"),
                 lambda: store.read(path), lambda: store.info(path), lambda: store.list(path),
                 lambda: store.delete(path), lambda: store.open_output(path),
                 lambda: store.delete_dir(path), lambda: store.append(path, b"x")):
        with pytest.raises(UnsafePathError):
            call()
    assert {i.path: i.size for i in store.list("", recursive=True)} == before


def test_info_exists_size(store):
    store.write("d/f", b"xyz")
    info = store.info("d/f")
    assert info is not None and info.size == 3 and not info.is_dir and info.path == "d/f"
    assert info.mtime_ns is not None
    assert store.info("d").is_dir and store.info("d").path == "d"
    assert store.info("nope") is None and store.info("d/nope") is None
    assert store.exists("d/f") and store.exists("d") and not store.exists("nope")
    assert store.size("d/f") == 3
    with pytest.raises(FileNotFoundError):
        store.size("nope")


def test_delete_and_delete_dir(store):
    store.write("f", b"1")
    assert store.delete("f") is True
    assert not store.exists("f")
    assert store.delete("f") is False
    with pytest.raises(FileNotFoundError):
        store.delete("f", missing_ok=False)
    store.mkdirs("a/b/c")
    store.mkdirs("a/b/c")
    for i in range(5):
        store.write(f"a/b/c/f{i}", b"x")
    store.write("a/g", b"y")
    store.write("ab/keep", b"z")  # a sibling whose name starts like the folder
    store.delete_dir("a")
    assert not store.exists("a") and store.list("a", recursive=True) == []
    assert store.read("ab/keep") == b"z"
    store.delete_dir("a")  # absent: nothing to do


def test_delete_many_deletes_present_and_absent_files_alike(store):
    for i in range(3):
        store.write(f"m/f{i}", b"x")
    store.write("m/keep", b"k")
    store.delete_many(["m/f0", "m/f1", "m/f2", "m/never"])
    assert [i.name for i in store.list("m")] == ["keep"]
    store.delete_many([])
    assert store.keeps_empty_folders is (not isinstance(store, S3Storage))


def test_parquet_through_open_output_and_open_input(store):
    table = pa.table({"id": list(range(50_000)), "s": [f"v{i}" for i in range(50_000)]})
    with store.open_output("o/part.parquet") as f:
        pq.write_table(table, f, row_group_size=10_000)
    with store.open_input("o/part.parquet") as f:
        assert isinstance(f, pa.NativeFile) and f.seekable()
        pf = pq.ParquetFile(f)
        assert pf.metadata.num_row_groups == 5
        assert pf.read(columns=["s"]).column("s").to_pylist() == table.column("s").to_pylist()
        f.seek(0)
        assert f.read(4) == b"PAR1"
    assert read_base_file(store, "o/part.parquet", table.schema, ["id"]).column("id") == table.column("id")
    with pytest.raises(FileExistsError):
        with store.open_output("o/part.parquet") as f:
            f.write(b"other")
    assert pq.read_table(pa.BufferReader(store.read("o/part.parquet"))).equals(table)


def test_open_output_writes_nothing_when_the_block_fails(store):
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with store.open_output("o/failed.bin") as f:
            f.write(b"half")
            f.flush()
            raise Boom()
    if isinstance(store, S3Storage):  # local storage leaves the partial file for rollback to delete
        assert not store.exists("o/failed.bin")


def test_uri_and_child(store):
    child = store.child("sub/dir")
    assert child.uri() == store.uri("sub/dir")
    assert store.uri("x/y") == store.uri() + "/x/y"
    child.create("f", b"c")
    assert store.read("sub/dir/f") == b"c"
    assert [i.path for i in child.list("")] == ["f"]


# --- S3 only: the layout on the server ------------------------------------------------------


def test_keys_on_the_server(s3, raw, s3_uri):
    assert s3.uri() == s3_uri and s3.uri("a/b") == f"{s3_uri}/a/b"
    s3.create("a/b", b"1")
    s3.write("c", b"2")
    assert _keys(raw, s3) == {"a/b", "c"}
    assert raw.get_object(Bucket=s3.bucket, Key=f"{s3.prefix}/a/b")["Body"].read() == b"1"
    s3.mkdirs("empty/dir")  # no object: prefixes exist through what is under them
    assert _keys(raw, s3) == {"a/b", "c"}


def test_folder_markers_of_other_tools_are_directories(s3, raw):
    # Hadoop's s3a and S3 consoles create empty "name/" objects for folders.
    raw.put_object(Bucket=s3.bucket, Key=f"{s3.prefix}/m/", Body=b"")
    raw.put_object(Bucket=s3.bucket, Key=f"{s3.prefix}/m/n/", Body=b"")
    raw.put_object(Bucket=s3.bucket, Key=f"{s3.prefix}/m/n/f", Body=b"1")
    assert [(i.path, i.is_dir) for i in s3.list("m")] == [("m/n", True)]
    assert {(i.path, i.is_dir) for i in s3.list("", recursive=True)} == {
        ("m", True), ("m/n", True), ("m/n/f", False)}
    s3.delete_dir("m")
    assert _keys(raw, s3) == set()


def test_multipart_upload_becomes_visible_only_on_close(s3, raw):
    part = 5 * 1024 * 1024  # the smallest part S3 takes
    data = bytes(range(256)) * (12 * 1024 * 1024 // 256 + 3)
    out = S3Output(s3, "big/file", part_size=part)
    for i in range(0, len(data), 1_000_000):
        out.write(data[i:i + 1_000_000])
    assert raw.list_multipart_uploads(Bucket=s3.bucket).get("Uploads")  # parts are going up
    assert not s3.exists("big/file")
    out.close()
    assert s3.read("big/file") == data and s3.size("big/file") == len(data)
    assert not raw.list_multipart_uploads(Bucket=s3.bucket).get("Uploads")


def test_failed_multipart_upload_is_aborted(s3, raw):
    with pytest.raises(RuntimeError):
        with S3Output(s3, "big/failed", part_size=5 * 1024 * 1024) as out:
            out.write(b"x" * (11 * 1024 * 1024))
            raise RuntimeError("the writer failed")
    assert not s3.exists("big/failed")
    assert not raw.list_multipart_uploads(Bucket=s3.bucket).get("Uploads")
    out = S3Output(s3, "big/dropped", part_size=5 * 1024 * 1024)
    out.write(b"y" * (6 * 1024 * 1024))
    del out  # dropped without close: aborted, not uploaded
    assert not s3.exists("big/dropped")
    assert not raw.list_multipart_uploads(Bucket=s3.bucket).get("Uploads")


def test_append_is_refused(s3):
    assert not s3.supports_append
    with pytest.raises(StorageError) as err:
        s3.append("log", b"x")
    assert "Help:" in str(err.value)


# --- S3 only: lost answers of a conditional put ------------------------------------------------


def _patch_put(monkeypatch, s3: S3Storage, step):
    """Route the single-shot client's put_object through ``step(n, send)``: ``n`` counts the
    calls, ``send()`` performs the real request."""
    client = s3.clients.single_shot
    real = client.put_object
    calls: list[dict] = []

    def put_object(**kw):
        calls.append(kw)
        return step(len(calls), lambda: real(**kw))

    monkeypatch.setattr(client, "put_object", put_object)
    return calls


def _read_timeout() -> ReadTimeoutError:
    return ReadTimeoutError(endpoint_url="http://127.0.0.1")


def test_lost_answer_of_a_create_that_landed_is_a_success(s3, raw, monkeypatch, no_backoff):
    def step(n, send):
        answer = send()
        if n == 1:
            raise _read_timeout()  # the server took it; the answer never came back
        return answer

    calls = _patch_put(monkeypatch, s3, step)
    s3.create("lost/landed", b"mine")  # the retry's 412 is our own object
    assert len(calls) == 2
    assert s3.read("lost/landed") == b"mine"
    head = raw.head_object(Bucket=s3.bucket, Key=f"{s3.prefix}/lost/landed")
    assert head["Metadata"][TOKEN_METADATA_KEY] == calls[0]["Metadata"][TOKEN_METADATA_KEY]
    monkeypatch.undo()
    with pytest.raises(FileAlreadyExistsError):
        s3.create("lost/landed", b"again")  # created once: a second create loses


def test_lost_answer_while_another_writer_created_it_is_already_exists(s3, s3_uri, s3_options,
                                                                       monkeypatch, no_backoff):
    other = get_storage(s3_uri, s3_options)  # another writer with its own clients

    def step(n, send):
        if n == 1:
            other.create("lost/theirs", b"theirs")
            raise _read_timeout()
        return send()

    _patch_put(monkeypatch, s3, step)
    with pytest.raises(FileAlreadyExistsError):
        s3.create("lost/theirs", b"mine")
    assert s3.read("lost/theirs") == b"theirs"


def test_lost_answers_and_no_object_is_an_unknown_outcome(s3, monkeypatch, no_backoff):
    def step(n, send):
        raise _read_timeout()

    calls = _patch_put(monkeypatch, s3, step)
    with pytest.raises(StorageOutcomeUnknownError) as err:
        s3.create("lost/nothing", b"mine")
    assert "Help:" in str(err.value) and len(calls) == s3_conditional.ATTEMPTS


def test_unreachable_server_is_a_definite_failure(s3, monkeypatch, no_backoff):
    def step(n, send):
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1")

    calls = _patch_put(monkeypatch, s3, step)
    with pytest.raises(StorageError) as err:
        s3.create("never/sent", b"x")
    assert not isinstance(err.value, StorageOutcomeUnknownError)  # a refused connection sent nothing
    assert len(calls) == s3_conditional.ATTEMPTS and not s3.exists("never/sent")


def test_conflicting_conditional_write_is_retried(s3, monkeypatch, no_backoff):
    def step(n, send):
        if n == 1:
            raise ClientError({"Error": {"Code": "ConditionalRequestConflict", "Message": "busy"},
                               "ResponseMetadata": {"HTTPStatusCode": 409}}, "PutObject")
        return send()

    calls = _patch_put(monkeypatch, s3, step)
    s3.create("conflict/f", b"v")
    assert s3.read("conflict/f") == b"v" and len(calls) == 2


# --- S3 only: options, buckets, dependencies ---------------------------------------------------


def test_conditional_put_off_makes_create_look_then_put(s3_uri, s3_options):
    s = get_storage(s3_uri, {**s3_options, "s3.conditional-put": "false"})
    assert s.atomic_create is False
    assert get_storage(s3_uri, {**s3_options, "s3.conditional-put": "TRUE"}).atomic_create
    s.create("nc/f", b"1")
    with pytest.raises(FileAlreadyExistsError):
        s.create("nc/f", b"2")
    assert s.read("nc/f") == b"1"
    with s.open_output("nc/g") as f:
        f.write(b"g")
    assert s.read("nc/g") == b"g"


@pytest.mark.parametrize("options, named", [
    ({"s3.endpiont": "http://x"}, "s3.endpiont"),
    ({"s3.conditional-put": "maybe"}, "s3.conditional-put"),
    ({"s3.endpoint": "127.0.0.1:9000"}, "s3.endpoint"),
    ({"s3.access-key-id": "a"}, "s3.secret-access-key"),
])
def test_bad_options_are_config_errors(options, named):
    with pytest.raises(ConfigError) as err:
        get_storage("s3://bucket/t", options)
    assert named in str(err.value) and "Help:" in str(err.value)


def test_options_of_other_layers_are_left_alone(s3_uri, s3_options):
    assert get_storage(s3_uri, {**s3_options, "hoodie.table.name": "t"}).atomic_create


@pytest.mark.parametrize("uri", ["s3://", "s3:///t", "s3://key:secret@bucket/t", "s3://b/t?x=1"])
def test_malformed_uris_are_refused(uri):
    with pytest.raises(ConfigError):
        get_storage(uri, S3_TEST_CREDENTIALS)


def test_missing_bucket_is_named(s3_options):
    s = get_storage("s3://lakehouse-no-such-bucket/t", s3_options)
    for op in (lambda: s.list(""), lambda: s.read("x"), lambda: s.create("x", b"1"),
               lambda: s.exists("x")):
        with pytest.raises(ConfigError) as err:
            op()
        assert "lakehouse-no-such-bucket" in str(err.value) and "Help:" in str(err.value)


def test_s3a_is_the_same_storage(s3_uri, s3_options):
    s3a = get_storage("s3a://" + s3_uri[len("s3://"):], s3_options)
    assert isinstance(s3a, S3Storage) and s3a.uri().startswith("s3a://")
    s3a.create("via/s3a", b"1")
    assert get_storage(s3_uri, s3_options).read("via/s3a") == b"1"


def test_environment_alone_reaches_the_server(s3_uri):
    s = get_storage(s3_uri)  # endpoint, credentials and region from the AWS_* variables
    s.create("env/f", b"1")
    assert s.read("env/f") == b"1"
    with s.open_input("env/f") as f:  # pyarrow's file system gets the same settings
        assert f.read() == b"1"


def test_a_storage_pickles_for_other_processes(s3):
    s3.write("p/f", b"1")
    copy = pickle.loads(pickle.dumps(s3))
    assert copy.uri() == s3.uri() and copy.read("p/f") == b"1"
    secret = S3Settings.from_options({"s3.access-key-id": "k", "s3.secret-access-key": "sekrit",
                                      "s3.session-token": "tok3n"})
    assert "sekrit" not in repr(secret) and "tok3n" not in repr(secret)  # tracebacks, logs


def test_missing_boto3_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 -> ImportError
    with pytest.raises(ConfigError) as err:
        get_storage("s3://bucket/t")
    assert "lakehouse[s3]" in str(err.value)


def test_a_network_failure_mid_read_is_not_called_corruption(s3, monkeypatch):
    table = pa.table({"id": [1, 2, 3]})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    s3.write("n/f.parquet", buf.getvalue())
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    down = pafs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                             scheme="http", endpoint_override=f"127.0.0.1:{dead}",
                             allow_delayed_open=True,
                             retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
    monkeypatch.setattr(s3.clients, "filesystem", lambda: down)
    with pytest.raises(StorageError) as err:
        read_base_file(s3, "n/f.parquet", table.schema, None)
    assert not isinstance(err.value, CorruptFileError) and "Help:" in str(err.value)


def test_a_small_file_of_known_size_is_read_in_one_request(s3_uri, s3_options, monkeypatch):
    """A parquet file whose size a listing gave, up to WHOLE_READ_BYTES, is one GET (pyarrow's
    file asks for its size, then its footer, then its columns); a stale size still reads what
    the object holds."""
    from lakehouse.storage import s3 as s3_module
    store = get_storage(s3_uri, s3_options)
    table = pa.table({"id": list(range(1000)), "s": [f"v{i}" for i in range(1000)]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    store.write("o/small.parquet", data)
    gets = []
    real = S3Storage.read
    monkeypatch.setattr(S3Storage, "read", lambda self, path: gets.append(path) or real(self, path))
    monkeypatch.setattr(type(store.clients), "filesystem",
                        lambda self: pytest.fail("pyarrow's S3 file used for a small file of known size"))
    for size in (len(data), len(data) - 10):
        with store.open_input("o/small.parquet", size) as f:
            assert pq.read_table(f, columns=["s"]).column("s").to_pylist() == table.column("s").to_pylist()
    assert gets == ["o/small.parquet"] * 2
    monkeypatch.undo()
    monkeypatch.setattr(s3_module, "WHOLE_READ_BYTES", 100)
    with store.open_input("o/small.parquet", len(data)) as f:  # over the bound: pyarrow's file
        assert not isinstance(f, pa.BufferReader) and pq.read_table(f).equals(table)
