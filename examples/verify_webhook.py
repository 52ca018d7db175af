# Verifies a webhook delivery with Python's standard library alone (Python 3.8+). In a receiver:
#   verify(secret, headers["X-FV-Timestamp"], headers["X-FV-Signature"], raw_body)
# From a shell: WEBHOOK_SECRET=whsec_… python3 verify_webhook.py TIMESTAMP SIGNATURE < raw-body
import hashlib
import hmac
import os
import sys
import time

TOLERANCE_S = 300  # refuse a captured delivery replayed later


def verify(secret, timestamp, signature, raw_body, now=None):
    """True when signature is "sha256=" + hex HMAC-SHA256(secret, f"{timestamp}." + raw_body)."""
    if not (timestamp and signature and timestamp.isascii() and timestamp.isdigit()):  # absent: None
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > TOLERANCE_S:
        return False
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + raw_body, hashlib.sha256)
    # Sign-check the raw bytes, before any JSON parsing; compare in constant time.
    return hmac.compare_digest(("sha256=" + mac.hexdigest()).encode(), signature.encode())


if __name__ == "__main__":
    ok = verify(os.environ["WEBHOOK_SECRET"], sys.argv[1], sys.argv[2], sys.stdin.buffer.read())
    print("verified" if ok else "refused")
    sys.exit(0 if ok else 1)
