# Verifies a webhook delivery with Python's standard library alone (Python 3.8+). In a receiver:
#   verify([secret], headers["X-FV-Timestamp"],
#          [headers.get("X-FV-Signature"), headers.get("X-FV-Signature-Next")], raw_body)
# During a secret rotation's overlap pass both secrets: [new_secret, old_secret].
# From a shell: WEBHOOK_SECRET=whsec_…[,whsec_…] python3 verify_webhook.py TIMESTAMP SIGNATURE [SIGNATURE_NEXT] < raw-body
import hashlib
import hmac
import os
import sys
import time

TOLERANCE_S = 300  # refuse a captured delivery replayed later


def verify(secrets, timestamp, signatures, raw_body, now=None):
    """True when a signature is "sha256=" + hex HMAC-SHA256(secret, f"{timestamp}." + raw_body) for a secret."""
    signatures = [s for s in signatures if s]  # a header that is absent: None
    if not (timestamp and signatures and timestamp.isascii() and timestamp.isdigit()):
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > TOLERANCE_S:
        return False
    ok = False
    for secret in secrets:
        if not secret:
            raise ValueError("an empty secret: is WEBHOOK_SECRET set?")
        mac = hmac.new(secret.encode(), timestamp.encode() + b"." + raw_body, hashlib.sha256)
        expected = ("sha256=" + mac.hexdigest()).encode()
        # Sign-check the raw bytes, before any JSON parsing; compare in constant time.
        for signature in signatures:
            ok = hmac.compare_digest(expected, signature.encode()) or ok
    return ok


if __name__ == "__main__":
    secrets = os.environ["WEBHOOK_SECRET"].split(",")
    ok = verify(secrets, sys.argv[1], sys.argv[2:4], sys.stdin.buffer.read())
    print("verified" if ok else "refused")
    sys.exit(0 if ok else 1)
