"""The S3 bench's client side, on boto3 (tools/venv): an independent S3 client for setup,
verification and the baseline.
  s3_tool.py ENDPOINT BUCKET mkbucket
  s3_tool.py ENDPOINT BUCKET verify            prints "objects=.. bytes=.. records=.. offsets=<distinct> <min> <max>"
  s3_tool.py ENDPOINT BUCKET download DIR      every object into DIR (key with '/' as '#'), plus DIR/keys
  s3_tool.py ENDPOINT BUCKET upload DIR THREADS the baseline: PUT every file of DIR/keys as the same
                                               object, THREADS uploads at once (boto3 put_object)
Credentials: the test server's (sinks/s3/server.sh)."""
import concurrent.futures
import gzip
import io
import json
import os
import sys

import boto3
from botocore.config import Config
import zstandard

endpoint, bucket, command = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="picomq-test",
                  aws_secret_access_key="picomq-test-secret", region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}, max_pool_connections=32))


def keys():
    """The objects of records: not the sink's own _picomq/ keys (markers, the conditional-write probe)."""
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            if "_picomq/" not in item["Key"]:
                yield item["Key"]


if command == "mkbucket":
    s3.create_bucket(Bucket=bucket)
elif command == "verify":
    objects = size = records = 0
    offsets = set()
    for key in keys():
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        objects += 1
        size += len(body)
        if key.endswith(".gz"):
            body = gzip.decompress(body)
        elif key.endswith(".zst"):
            body = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body), read_across_frames=True).read()
        for line in body.splitlines():
            records += 1
            offsets.add(json.loads(line)["pico_offset"])
    lo, hi = (min(offsets), max(offsets)) if offsets else (-1, -1)
    print(f"objects={objects} bytes={size} records={records} offsets={len(offsets)} {lo} {hi}")
elif command == "download":
    out = sys.argv[4]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "keys"), "w") as listing:
        for key in keys():
            name = key.replace("/", "#")
            with open(os.path.join(out, name), "wb") as f:
                f.write(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
            listing.write(key + "\n")
elif command == "upload":
    src, threads = sys.argv[4], int(sys.argv[5])
    with open(os.path.join(src, "keys")) as listing:
        names = listing.read().split()

    def put(key):
        with open(os.path.join(src, key.replace("/", "#")), "rb") as f:
            s3.put_object(Bucket=bucket, Key=key, Body=f.read())

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, names))
else:
    sys.exit(f"unknown command {command}")
