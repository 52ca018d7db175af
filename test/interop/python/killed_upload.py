"""A recorder killed mid-upload: starts an UploadArchive of three 64 KiB chunks and one of the size
given, then holds the stream open until its process is killed (SIGKILL: no frame ends the stream).
Usage: killed_upload.py HOST:PORT REPLAY_ID LAST_CHUNK_SIZE"""

import random
import sys
import threading

import grpc

import protos

target, replay_id, last = sys.argv[1], sys.argv[2], int(sys.argv[3])
request = protos.message("replay.replays.v1.UploadArchiveRequest")


def messages():
    yield request(replay_id=replay_id, format_version=2)
    for size in [65536, 65536, 65536, last]:
        yield request(chunk=random.randbytes(size))
    threading.Event().wait()


channel = grpc.insecure_channel(target)
upload = protos.method(channel, "replay.replays.v1.RecordingService", "UploadArchive")
upload(messages(), timeout=120)
