#!/usr/bin/env bash
# `npm run test:image`: builds the image from deploy/Dockerfile and runs the dev overlay's
# five Deployments from it against this machine's Postgres and NATS (test/image/image.check.ts says
# how each container is run and what is checked). Needs root (rootful podman), DATABASE_URL and
# NATS_URL. Steps:
# 1. podman, buildah, runc, fuse-overlayfs and debootstrap from Debian, if missing;
# 2. the local base image (test/image/base-image.sh), made once per Debian release and Node version;
# 3. `podman build` of deploy/Dockerfile as it is, its NODE_IMAGE the local base;
# 4. the checks (vitest, test/image/vitest.config.ts).
# A failed step ends the run with its own message and a non-zero exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# runc and the ulimits root can set here, for every podman and buildah call (containers.conf).
export CONTAINERS_CONF=$PWD/test/image/containers.conf
: "${DATABASE_URL:?the image test runs the processes against Postgres: set DATABASE_URL}"
: "${NATS_URL:?the image test runs the processes against NATS: set NATS_URL}"
started=$SECONDS

need=()
for tool in podman buildah runc fuse-overlayfs debootstrap; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
  echo "image test: installing ${need[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
fi

base_started=$SECONDS
base=$(test/image/base-image.sh)
echo "image test: base image $base ($((SECONDS - base_started)) s)"

image=localhost/replay-service:image-test
build_started=$SECONDS
if ! podman build --quiet --network host -f deploy/Dockerfile --build-arg "NODE_IMAGE=$base" -t "$image" . >/dev/null; then
  echo "image test: podman build -f deploy/Dockerfile failed (its output is above)" >&2
  exit 1
fi
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "image test: built $image in $((SECONDS - build_started)) s, $((size / 1000000)) MB"

# Each build leaves the previous image and its build stage untagged (about 560 MB a run): dropped.
# Only dangling images go, which no container uses and nothing names.
podman image prune --force >/dev/null

REPLAY_IMAGE=$image npx vitest run --config test/image/vitest.config.ts "$@"
echo "image test: passed in $((SECONDS - started)) s"
