# A signed request (FV1-HMAC-SHA256) with Python's standard library alone (Python 3.8+):
#   TENANT_ID=… KID=… SECRET=… python3 sign_request.py GET 'http://127.0.0.1:8080/v1/replays?page_size=5'
#   TENANT_ID=… KID=… SECRET=… python3 sign_request.py POST http://127.0.0.1:8080/v1/webhooks '{"url": …}'
# The URL is signed exactly as it is sent: percent-encode anything outside ASCII in it yourself.
import hashlib
import hmac
import os
import secrets
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def recode(text):
    # unquote keeps "+" a plus (unquote_plus would make it a space); quote(safe="") leaves exactly
    # RFC 3986's unreserved A-Z a-z 0-9 - . _ ~ and writes upper-case hex.
    return urllib.parse.quote(urllib.parse.unquote(text, errors="strict"), safe="")


def canonical_query(query):
    pairs = []
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")  # a pair without "=" has an empty value
            pairs.append(tuple(recode(side) for side in (name, value)))
    # Sort the ENCODED pairs (ASCII, so byte by byte), by name then value; not the decoded text.
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def authorization(tenant, kid, secret, method, url, body=b""):
    ts = str(int(time.time() * 1000))  # milliseconds here; webhooks' X-FV-Timestamp is seconds
    nonce = secrets.token_urlsafe(18)  # 24 characters of [A-Za-z0-9_-]
    parts = urllib.parse.urlsplit(url)
    lines = ["FV1-HMAC-SHA256", tenant, ts, nonce, kid, method.upper(), parts.path,
             canonical_query(parts.query), hashlib.sha256(body).hexdigest()]
    sig = hmac.new(secret.encode(), "\n".join(lines).encode(), hashlib.sha256).hexdigest()
    return f"FV1-HMAC-SHA256 tenant={tenant},ts={ts},nonce={nonce},kid={kid},sig={sig}"


if __name__ == "__main__":
    method, url = sys.argv[1], sys.argv[2]
    body = sys.argv[3].encode() if len(sys.argv) > 3 else b""
    env = os.environ
    headers = {"Authorization": authorization(env["TENANT_ID"], env["KID"], env["SECRET"], method, url, body)}
    if body:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=body or None, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request) as res:
            print(res.status, res.read().decode())
    except urllib.error.HTTPError as err:
        print(err.code, err.read().decode())
        sys.exit(1)
