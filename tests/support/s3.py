"""A real S3 API on this machine: moto's standalone server (``moto[server]``) as its
own process on a free port, and a boto3 client to look into its buckets from the
outside. Never a mock inside the test process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests

from tests.support.runtime_fixtures import free_port, wait_for

ACCESS_KEY = "test-access-key"
SECRET_KEY = "test-secret-key-0123456789"
REGION = "us-east-1"


@dataclass
class S3Server:
    process: subprocess.Popen[bytes]
    url: str

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        return [item["Key"] for item in self.client().list_objects_v2(Bucket=bucket).get("Contents", [])]

    def read(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def settings(self, bucket: str) -> dict[str, str]:
        """The ASYNCH_* environment that points model-asynch at this bucket."""
        return {
            "ASYNCH_RESULT_STORAGE": "s3",
            "ASYNCH_S3_BUCKET": bucket,
            "ASYNCH_S3_ENDPOINT_URL": self.url,
            "ASYNCH_S3_REGION": REGION,
            "ASYNCH_S3_ACCESS_KEY_ID": ACCESS_KEY,
            "ASYNCH_S3_SECRET_ACCESS_KEY": SECRET_KEY,
            "ASYNCH_S3_ADDRESSING_STYLE": "path",
        }

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_s3_server(log: Path) -> S3Server:
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = S3Server(process=process, url=f"http://127.0.0.1:{port}")

    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"moto server exited: {log.read_text()[-2000:]}")
        try:
            return requests.get(f"{server.url}/moto-api/", timeout=1).status_code < 500
        except requests.RequestException:
            return False

    wait_for(up, timeout=30, every=0.1, what="the S3 server")
    return server


@pytest.fixture(scope="module", name="s3_server")
def s3_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path_factory.mktemp("s3") / "moto.log")
    yield server
    server.stop()
