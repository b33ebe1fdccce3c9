"""A real S3 API for tests: a moto server on 127.0.0.1 that can be stopped and started again.

moto keeps its buckets and objects in module-level backends of this process, so a server started
again on the same port serves the same data: an outage, not a data loss.
"""

from __future__ import annotations

import logging
import uuid

BUCKET = "sparkrecover-test"
# Every request the server answered, as (method, path): a test counts the requests a run makes.
REQUESTS: list[tuple[str, str]] = []


def _server_class():
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class RefusingHandler(MotoRequestHandler):
        """Once its server is stopped, a kept-alive connection gets no answer, only closed: without
        this, clients with pooled connections would never notice the outage."""

        def run_wsgi(self):
            if getattr(self.server, "refusing", False):
                self.close_connection = True
                return None
            REQUESTS.append((self.command, self.path))
            return super().run_wsgi()

    class StoppableMotoServer(ThreadedMotoServer):
        def _server_entry(self):
            app = DomainDispatcherApplication(create_backend_app)
            self._server = make_server(self._ip_address, self._port, app, True, request_handler=RefusingHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return StoppableMotoServer


class MotoS3:
    def __init__(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
        self._factory = _server_class()
        self.port = 0
        self._server = None
        self.start()
        self.port = self._server.get_host_and_port()[1]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        self._server = self._factory(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()

    def stop(self) -> None:
        """Stop answering and close the socket, so clients get 'connection refused' at once."""
        server, self._server = self._server, None
        if server is not None:
            server._server.refusing = True
            server.stop()
            server._server.server_close()  # stop() alone leaves the socket listening, unanswered

    def env(self) -> dict[str, str]:
        """What a process needs to reach this server through the standard AWS variables."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def create_bucket(self, name: str = BUCKET) -> str:
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        try:
            client.create_bucket(Bucket=name)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        return name

    @staticmethod
    def unique_prefix(bucket: str = BUCKET) -> str:
        return f"s3://{bucket}/{uuid.uuid4().hex[:12]}"
