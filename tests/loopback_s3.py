"""An S3-compatible server on 127.0.0.1 for the tests and benchmarks: moto's server (the
`moto[server]` test dependency) in a thread of this process, with a request counter.

    with LoopbackS3() as s3:
        s3.upload(local_dir, "cluster")          # through pyarrow.fs, as a client would
        uri = s3.uri("cluster")                   # s3://KEY:SECRET@bucket/cluster?endpoint...
        s3.requests                               # HTTP requests served so far

Spark's Python workers read the store through pyarrow.fs in their own processes: the
credentials travel in the URI (the jobs strip them from everything they write), the
endpoint in its query (`endpoint_override`, `scheme=http`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Dict, Optional

import pyarrow.fs as pafs

__all__ = ["ACCESS_KEY", "BUCKET", "SECRET_KEY", "LoopbackS3"]

ACCESS_KEY = "crcmerkleTESTKEY"
SECRET_KEY = "crcmerkle-test-SECRET-do-not-print"
BUCKET = "crcmerkle-test"
REGION = "us-east-1"


class LoopbackS3:
    """moto's S3 server on 127.0.0.1 (an ephemeral port), stopped by stop() / the with."""

    def __init__(self, bucket: str = BUCKET) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        app = DomainDispatcherApplication(create_backend_app)
        self.requests = 0
        lock = threading.Lock()

        def counting(environ: Dict[str, Any], start_response: Any) -> Any:
            with lock:
                self.requests += 1
            return app(environ, start_response)

        self._server = make_server(
            "127.0.0.1", 0, counting, threaded=True, request_handler=MotoRequestHandler
        )
        self.port = int(self._server.server_address[1])
        self.endpoint = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.bucket = bucket
        self.filesystem().create_dir(bucket)

    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            region=REGION,
            endpoint_override=self.endpoint,
            scheme="http",
            allow_bucket_creation=True,
        )

    def uri(self, key: str = "", credentials: bool = True, trailing_slash: bool = False) -> str:
        """s3:// URI of `key` in the bucket: credentials in the user information, the
        endpoint in the query (pyarrow.fs.FileSystem.from_uri understands both)."""
        auth = f"{ACCESS_KEY}:{SECRET_KEY}@" if credentials else ""
        path = f"{self.bucket}/{key}".rstrip("/") + ("/" if trailing_slash else "")
        return f"s3://{auth}{path}?endpoint_override={self.endpoint}&scheme=http&region={REGION}"

    def env(self) -> Dict[str, str]:
        """The same store for clients that read the environment (AWS SDKs, Hadoop s3a)."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": f"http://{self.endpoint}",
        }

    def upload(self, local_dir: str, key: str) -> None:
        """Copy a local directory tree to bucket/key through pyarrow.fs (HTTP PUTs)."""
        pafs.copy_files(
            str(local_dir),
            f"{self.bucket}/{key}",
            source_filesystem=pafs.LocalFileSystem(),
            destination_filesystem=self.filesystem(),
        )

    def put_direct(self, key: str, data: bytes = b"") -> None:
        """Store an object without HTTP (moto's backend, in this process): for building the
        large listings of the benchmarks quickly. Listing them still goes over HTTP."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        s3_backends[DEFAULT_ACCOUNT_ID]["global"].put_object(self.bucket, key, data)

    def gives_part_checksums(self) -> bool:
        """Whether HeadObject with PartNumber answers a composite upload's part checksum
        (moto from 5.2.6 does, 5.2.5 did not): the copy check then composes the full CRC
        from the parts, and the tests' ground truth must say so. Probed on a 2-part upload."""
        import boto3

        client = boto3.client(
            "s3",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            endpoint_url=f"http://{self.endpoint}",
        )
        key = ".probe/part-checksums"
        up = client.create_multipart_upload(Bucket=self.bucket, Key=key, ChecksumAlgorithm="CRC32")
        done = []
        for i, body in enumerate((b"\0" * (5 << 20), b"x"), 1):
            r = client.upload_part(
                Bucket=self.bucket, Key=key, UploadId=up["UploadId"], PartNumber=i, Body=body,
                ChecksumAlgorithm="CRC32",
            )  # fmt: skip
            done.append({"PartNumber": i, "ETag": r["ETag"], "ChecksumCRC32": r["ChecksumCRC32"]})
        client.complete_multipart_upload(
            Bucket=self.bucket, Key=key, UploadId=up["UploadId"], MultipartUpload={"Parts": done}
        )
        try:
            head = client.head_object(
                Bucket=self.bucket, Key=key, PartNumber=1, ChecksumMode="ENABLED"
            )
            return "ChecksumCRC32" in head
        finally:
            client.delete_object(Bucket=self.bucket, Key=key)

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)
        self._server.server_close()

    def __enter__(self) -> LoopbackS3:
        return self

    def __exit__(self, *exc: Optional[BaseException]) -> None:
        self.stop()
