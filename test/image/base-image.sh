#!/usr/bin/env bash
# Makes the local stand-in for node:20-bookworm-slim, the Dockerfile's NODE_IMAGE, once: no
# container registry is reachable from our machines, so it is built from Debian's mirror and this
# machine's own Node. Prints the image's name. Cached by Debian release and Node version: when the
# image exists it is reused and nothing is built (a new Node or Debian release makes a new one).
#   Debian <release> minbase + libstdc++6 (node links it), this machine's node and npm in
#   /usr/local as in the official image, user and group `node` (1000:1000), and the machine's CA
#   bundle with NODE_EXTRA_CA_CERTS (the package registry's certificate chains to a CA only that
#   bundle holds, so the build's `npm ci` needs it).
set -euo pipefail
release=$(. /etc/os-release && echo "$VERSION_CODENAME")
node_version=$(node --version)
image="localhost/replay-node-base:${release}-node${node_version#v}"
if podman image exists "$image"; then
  echo "$image"
  exit 0
fi

# The mirror apt uses here (deb822 sources first, then the one-line format).
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

work=$(mktemp -d "${TMPDIR:-/var/tmp}/replay-base.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
started=$SECONDS
debootstrap --variant=minbase --include=libstdc++6 "$release" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log" >&2; echo "base image: debootstrap $release from $mirror failed" >&2; exit 1; }

node_bin=$(command -v node)
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
install -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
mkdir -p "$rootfs/usr/local/lib/node_modules"
cp -a "$npm_dir" "$rootfs/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
echo "node:x:1000:" >>"$rootfs/etc/group"
echo "node:x:1000:1000::/home/node:/bin/bash" >>"$rootfs/etc/passwd"
echo "node:*:19000:0:99999:7:::" >>"$rootfs/etc/shadow"
install -d -o 1000 -g 1000 "$rootfs/home/node"
mkdir -p "$rootfs/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
# What the slim image leaves out too: downloaded packages, package lists, docs, manuals.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*

tar -C "$rootfs" --numeric-owner -cf - . |
  podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change "ENV NODE_VERSION=${node_version#v}" \
    --change 'CMD ["node"]' \
    - "$image" >/dev/null
echo "base image: $image made in $((SECONDS - started)) s" >&2
echo "$image"
