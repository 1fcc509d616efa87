"""The store's settings given to create_table/open_table (no AWS_* environment): used to reach
the store, never written into the table."""

from __future__ import annotations

import uuid

import pyarrow as pa

from lakehouse.table import create_table, open_table


def test_s3_settings_reach_the_store_and_stay_out_of_the_table(s3_options, monkeypatch):
    import boto3
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    bucket = f"lakehouse-opts-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_options["s3.endpoint"], region_name=s3_options["s3.region"],
                 aws_access_key_id=s3_options["s3.access-key-id"],
                 aws_secret_access_key=s3_options["s3.secret-access-key"]).create_bucket(Bucket=bucket)
    uri = f"s3://{bucket}/t"
    table = create_table(uri, name="t", record_key="id", merge_mode="COMMIT_TIME_ORDERING", options={
        **s3_options, "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"})
    table.upsert(pa.table({"id": ["a"], "v": [1]}))
    props = table.storage.read(".hoodie/hoodie.properties").decode("latin-1")
    assert "OPTIMISTIC_CONCURRENCY_CONTROL" in props
    assert s3_options["s3.secret-access-key"] not in props and "s3." not in props
    again = open_table(uri, s3_options)
    assert again.concurrency.multi_writer
    assert again.read().column("v").to_pylist() == [1]
