"""Python's gRPC (C-core) against a running system, as an outside integrator would call it: only our
proto/ (protos.py) and docs/grpc-clients.md. REPLAY_INTEROP (JSON) says where the system is:
public_url, api_key (a tenant of the test's own), gateway_internal and services (host:port of each
service's own port), blob_dir (the replays service's blob store, to see an upload in flight).
"""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import unittest
import urllib.request
import uuid

import grpc

import protos

ENV = json.loads(os.environ["REPLAY_INTEROP"])
SERVICES = ENV["services"]
GATEWAY_INTERNAL = ENV["gateway_internal"]
HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024 * 1024

RECORDER = "replay.servers.v1.RecorderService"
RECORDING = "replay.replays.v1.RecordingService"
HEALTH = "grpc.health.v1.Health"
SERVING = protos.enum_value("grpc.health.v1.HealthCheckResponse.ServingStatus", "SERVING")

# The service names each service's own port serves (and answers Health/Check for).
NAMES = {
    "markers": ["replay.markers.v1.MarkersService"],
    "servers": ["replay.servers.v1.ServersService", RECORDER],
    "replays": ["replay.replays.v1.ReplaysService", RECORDING],
    "webhooks": ["replay.webhooks.v1.WebhooksService"],
}
# Where a recorder may call: the gateway's internal port (which forwards) and the service's own.
RECORDER_PORTS = [GATEWAY_INTERNAL, SERVICES["servers"]]
RECORDING_PORTS = [GATEWAY_INTERNAL, SERVICES["replays"]]
EVERY_PORT = [GATEWAY_INTERNAL, *SERVICES.values()]


def channel(target, **kwargs):
    return grpc.insecure_channel(target, **kwargs)


def call(target, service, method, request=None, **kwargs):
    """One unary call on a channel of its own; `request` is a dict of the request's fields."""
    with channel(target) as ch:
        rpc = protos.method(ch, service, method)
        return rpc(rpc.request_type(**(request or {})), timeout=kwargs.pop("timeout", 10), **kwargs)


def failure(fn, *args, **kwargs):
    """The grpc.RpcError `fn` raises; fails the test if it succeeds."""
    try:
        result = fn(*args, **kwargs)
    except grpc.RpcError as err:
        return err
    raise AssertionError(f"expected a failed call, got {result!r}")


def api(method, path, body=None):
    """The public HTTP API with the tenant's API key."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(ENV["public_url"] + path, data=data, method=method)
    req.add_header("authorization", f"Bearer {ENV['api_key']}")
    if data is not None:
        req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as res:
        text = res.read()
        return json.loads(text) if text else None


def new_server():
    return api("POST", "/v1/api/servers", {"name": f"py-{uuid.uuid4().hex[:8]}"})["serverId"]


def recording_server(port=SERVICES["replays"]):
    """A server that checked in, with a recording started once the replays service heard it connect."""
    server_id = new_server()
    call(SERVICES["servers"], RECORDER, "CheckIn", {"server_id": server_id, "plugin_version": "py-1"})
    deadline = time.monotonic() + 15
    while True:
        try:
            return server_id, call(port, RECORDING, "StartRecording", {"server_id": server_id}).replay_id
        except grpc.RpcError as err:
            detail = protos.error_detail(err)
            if time.monotonic() > deadline or detail is None or detail.code not in (
                "SERVER_NOT_FOUND",
                "SERVER_NOT_CONNECTED",
            ):
                raise


def upload(port, messages, timeout=30):
    with channel(port) as ch:
        rpc = protos.method(ch, RECORDING, "UploadArchive")
        return rpc((rpc.request_type(**m) for m in messages), timeout=timeout)


def archive_messages(replay_id, chunks, **header):
    return [{"replay_id": replay_id, **header}, *({"chunk": c} for c in chunks)]


def code_of(err):
    detail = protos.error_detail(err)
    return detail.code if detail else None


def poll(fn, until, seconds=15, what="condition"):
    deadline = time.monotonic() + seconds
    while True:
        value = fn()
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met after {seconds} s (last: {value!r})")
        time.sleep(0.05)


def part_files_of_size(size):
    tmp = os.path.join(ENV["blob_dir"], ".tmp")
    try:
        names = os.listdir(tmp)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        try:
            if name.endswith(".part") and os.path.getsize(os.path.join(tmp, name)) == size:
                found.append(os.path.join(tmp, name))
        except FileNotFoundError:
            pass
    return found


def unfinished_chunks():
    """Chunks of a size no other upload has, to find this upload's temporary file in the store."""
    chunks = [random.randbytes(65536) for _ in range(3)] + [random.randbytes(random.randint(1, 60000))]
    return chunks, sum(len(c) for c in chunks)


class Interop(unittest.TestCase):
    maxDiff = None

    # Health on every port --------------------------------------------------------------------

    def test_health_on_every_service_port_names_what_it_serves(self):
        for service, port in SERVICES.items():
            for name in ["", *NAMES[service]]:
                res = call(port, HEALTH, "Check", {"service": name})
                self.assertEqual(res.status, SERVING, f"{service} port, {name!r}")
            err = failure(call, port, HEALTH, "Check", {"service": "no.such.v1.Service"})
            self.assertEqual(err.code(), grpc.StatusCode.NOT_FOUND, port)
        for name in ["", "replay.identity.v1.IdentityAdminService"]:
            self.assertEqual(call(GATEWAY_INTERNAL, HEALTH, "Check", {"service": name}).status, SERVING, name)

    def test_point4_health_on_the_gateway_internal_port_names_every_service_it_serves(self):
        for name in sorted({n for names in NAMES.values() for n in names}):
            res = call(GATEWAY_INTERNAL, HEALTH, "Check", {"service": name})
            self.assertEqual(res.status, SERVING, name)

    # The recorder's calls --------------------------------------------------------------------

    def test_check_in(self):
        online = protos.enum_value("replay.servers.v1.ServerStatus", "SERVER_STATUS_ONLINE")
        for port in RECORDER_PORTS:
            server_id = new_server()
            res = call(port, RECORDER, "CheckIn", {"server_id": server_id, "plugin_version": "py-1.2.3"})
            self.assertEqual((res.server_id, res.status), (server_id, online), port)
            self.assertGreater(res.last_seen_at.seconds, time.time() - 600, port)

    def test_recording_lifecycle(self):
        asset_state = lambda name: protos.enum_value("replay.replays.v1.AssetState", name)  # noqa: E731
        for port in RECORDING_PORTS:
            server_id, replay_id = recording_server(port)
            self.assertEqual(str(uuid.UUID(replay_id)), replay_id)
            err = failure(call, port, RECORDING, "StartRecording", {"server_id": server_id})
            self.assertEqual((err.code(), code_of(err)), (grpc.StatusCode.FAILED_PRECONDITION, "RECORDING_IN_PROGRESS"))
            self.assertEqual(
                call(port, RECORDING, "FinishRecording", {"replay_id": replay_id, "size_bytes": 1234}).replay_id,
                replay_id,
            )
            err = failure(call, port, RECORDING, "FinishRecording", {"replay_id": replay_id})
            self.assertEqual((err.code(), code_of(err)), (grpc.StatusCode.FAILED_PRECONDITION, "INVALID_TRANSITION"))
            for state in ["ASSET_STATE_PROCESSING", "ASSET_STATE_READY"]:
                call(port, RECORDING, "SetAssetState", {"replay_id": replay_id, "state": asset_state(state)})
            for action in ["ReleaseCollection", "RevokeCollection", "ExpireReplay"]:
                call(port, RECORDING, action, {"replay_id": replay_id})
            # A finished recording frees the server for the next one.
            call(port, RECORDING, "StartRecording", {"server_id": server_id})

    def test_upload_archive_of_5_mb(self):
        for port in RECORDING_PORTS:
            _, replay_id = recording_server(port)
            chunks = [random.randbytes(MIB) for _ in range(5)]
            res = upload(port, archive_messages(replay_id, chunks, size_bytes=5 * MIB, format_version=2))
            self.assertEqual((res.replay_id, res.size_bytes), (replay_id, 5 * MIB), port)
            err = failure(call, port, RECORDING, "FinishRecording", {"replay_id": replay_id})
            self.assertEqual(code_of(err), "INVALID_TRANSITION", port)

    def test_twenty_concurrent_start_recordings_one_ok_nineteen_recording_in_progress(self):
        for port in RECORDING_PORTS:
            server_id, replay_id = recording_server(port)
            call(port, RECORDING, "FinishRecording", {"replay_id": replay_id})
            with channel(port) as ch:
                start = protos.method(ch, RECORDING, "StartRecording")
                futures = [start.future(start.request_type(server_id=server_id), timeout=15) for _ in range(20)]
                outcomes = []
                for future in futures:
                    try:
                        future.result()
                        outcomes.append("OK")
                    except grpc.RpcError as err:
                        outcomes.append(f"{err.code().name} {code_of(err)}")
            self.assertEqual(
                sorted(outcomes), ["FAILED_PRECONDITION RECORDING_IN_PROGRESS"] * 19 + ["OK"], port
            )

    # Uploads that end badly: nothing is finished with half an archive ------------------------

    def _upload_ended_midway(self, port, end):
        """An upload whose chunks all reached the service's temporary file, then ended by `end`;
        once the service dropped that file, the replay is still recording: a whole upload finishes it."""
        _, replay_id = recording_server(port)
        chunks, sent = unfinished_chunks()
        release = threading.Event()
        if end == "kill":
            child = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "killed_upload.py"), port, replay_id, str(len(chunks[-1]))],
                env=os.environ,
            )
            # The child writes chunks of the same sizes; only their sizes matter for the part file.
            finish = lambda: (child.send_signal(signal.SIGKILL), child.wait())  # noqa: E731
        else:

            def messages():
                request = protos.message("replay.replays.v1.UploadArchiveRequest")
                yield from (request(**m) for m in archive_messages(replay_id, chunks, format_version=2))
                release.wait(60)

            ch = channel(port)
            rpc = protos.method(ch, RECORDING, "UploadArchive")
            future = rpc.future(messages(), timeout=4 if end == "deadline" else 60)

            def finish():
                if end == "cancel":
                    self.assertTrue(future.cancel(), f"cancel on {port}: the call had already ended")
                else:
                    err = failure(future.result)
                    self.assertEqual(err.code(), grpc.StatusCode.DEADLINE_EXCEEDED, f"{end} on {port}")
                release.set()
                ch.close()

        try:
            parts = poll(lambda: part_files_of_size(sent), bool, what=f"{end} on {port}: every chunk stored")
            finish()
            poll(
                lambda: any(os.path.exists(p) for p in parts),
                lambda exists: not exists,
                what=f"{end} on {port}: the upload's temporary file removed",
            )
        finally:
            release.set()
            if end == "kill" and child.poll() is None:
                child.kill()
                child.wait()
        res = upload(port, archive_messages(replay_id, [b"abc"]))
        self.assertEqual((res.replay_id, res.size_bytes), (replay_id, 3), f"{end} on {port}")

    def test_upload_cancelled_midway_finishes_nothing(self):
        for port in RECORDING_PORTS:
            self._upload_ended_midway(port, "cancel")

    def test_upload_whose_client_process_is_killed_finishes_nothing(self):
        for port in RECORDING_PORTS:
            self._upload_ended_midway(port, "kill")

    def test_deadline_exceeded_mid_upload_finishes_nothing(self):
        for port in RECORDING_PORTS:
            self._upload_ended_midway(port, "deadline")

    # Large and malformed messages, error details ---------------------------------------------

    def test_a_message_over_4_mib_is_resource_exhausted(self):
        for port in RECORDING_PORTS:
            _, replay_id = recording_server(port)
            err = failure(upload, port, archive_messages(replay_id, [random.randbytes(4 * MIB + 1)]))
            self.assertEqual(err.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, port)
            # Nothing was finished: a whole upload still is.
            self.assertEqual(upload(port, archive_messages(replay_id, [b"abc"])).size_bytes, 3)
        for port in RECORDER_PORTS:
            big = {"server_id": str(uuid.uuid4()), "plugin_version": "x" * (4 * MIB + 1)}
            err = failure(call, port, RECORDER, "CheckIn", big)
            self.assertEqual(err.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, port)

    def test_a_malformed_message_is_invalid_argument(self):
        # A length-delimited field 1 that claims 127 bytes and has 2; a field with wire type 7.
        for raw in [b"\x0a\x7fab", b"\x0f\x01"]:
            for port in RECORDER_PORTS:
                with channel(port) as ch:
                    rpc = ch.unary_unary(f"/{RECORDER}/CheckIn")
                    err = failure(rpc, raw, timeout=10)
                    self.assertEqual(err.code(), grpc.StatusCode.INVALID_ARGUMENT, f"{raw!r} on {port}")

    def test_point6_error_details_decode_from_grpc_status_details_bin_with_proto_alone(self):
        for port in RECORDER_PORTS:
            unknown = str(uuid.uuid4())
            err = failure(call, port, RECORDER, "CheckIn", {"server_id": unknown})
            self.assertEqual((err.code(), code_of(err)), (grpc.StatusCode.NOT_FOUND, "SERVER_NOT_FOUND"), port)
            self.assertEqual(err.details(), f"no server {unknown}")
            err = failure(call, port, RECORDER, "CheckIn", {"server_id": "not-a-uuid"})
            self.assertEqual((err.code(), code_of(err)), (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SERVER_ID"), port)
        for port in RECORDING_PORTS:
            err = failure(call, port, RECORDING, "FinishRecording", {"replay_id": str(uuid.uuid4())})
            self.assertEqual((err.code(), code_of(err)), (grpc.StatusCode.NOT_FOUND, "REPLAY_NOT_FOUND"), port)

    # The hardening's points 1-3 -------------------------------------------------------------------

    def test_point1_an_oversized_header_block_gets_a_status_at_once_not_the_deadline(self):
        # docs/http2-limits.md: the ports advertise a 16 KiB header list (C-core's own hard limit).
        for port in RECORDER_PORTS:
            server_id = new_server()
            # A value well within the limit passes.
            call(port, RECORDER, "CheckIn", {"server_id": server_id}, metadata=[("x-note", "a" * 8192)])
            # Over the list limit, each field one HPACK decodes: the stream alone is refused.
            began = time.monotonic()
            big = [("x-big", "a" * 20000)]
            err = failure(call, port, RECORDER, "CheckIn", {"server_id": server_id}, metadata=big, timeout=10)
            took = time.monotonic() - began
            self.assertEqual(err.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, f"{port}: {err.details()}")
            self.assertLess(took, 5, f"{port}: answered after {took:.1f} s (the deadline is 10 s)")
            # One field over 64 KiB, which HPACK itself refuses (nghttp2 fails the connection, so no
            # stream status is possible): the connection is closed, UNAVAILABLE, long before the deadline.
            began = time.monotonic()
            huge = [("x-big", "a" * 65545)]
            err = failure(call, port, RECORDER, "CheckIn", {"server_id": server_id}, metadata=huge, timeout=10)
            took = time.monotonic() - began
            self.assertIn(
                err.code(),
                (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE),
                f"{port}: {err.details()}",
            )
            self.assertLess(took, 5, f"{port}: answered after {took:.1f} s (the deadline is 10 s)")
            # And the port serves the next call as before.
            call(port, RECORDER, "CheckIn", {"server_id": server_id})

    def test_point2_a_gzip_channel_works_on_every_port(self):
        for port in EVERY_PORT:
            with channel(port, compression=grpc.Compression.Gzip) as ch:
                check = protos.method(ch, HEALTH, "Check")
                self.assertEqual(check(check.request_type(), timeout=10).status, SERVING, port)
        for port in RECORDER_PORTS:
            with channel(port, compression=grpc.Compression.Gzip) as ch:
                check_in = protos.method(ch, RECORDER, "CheckIn")
                server_id = new_server()
                res = check_in(check_in.request_type(server_id=server_id, plugin_version="x" * 100_000), timeout=10)
                self.assertEqual(res.server_id, server_id, port)

    def test_point3_an_unknown_method_is_unimplemented_with_grpc_status(self):
        for port in EVERY_PORT:
            for path in [f"/{RECORDER}/NoSuchMethod", "/no.such.v1.Service/Call"]:
                with channel(port) as ch:
                    err = failure(ch.unary_unary(path), b"", timeout=10)
                self.assertEqual(err.code(), grpc.StatusCode.UNIMPLEMENTED, f"{path} on {port}")
                self.assertNotIn("404", err.details() or "", f"{path} on {port}: an HTTP 404, not grpc-status 12")


if __name__ == "__main__":
    unittest.main()
