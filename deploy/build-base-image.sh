#!/usr/bin/env bash
# Build the local base image securelp-base:bookworm (Debian bookworm, Python 3.11) with
# debootstrap, for hosts that reach no image registry, only a Debian mirror. The Dockerfile
# builds FROM it (its ARG BASE_IMAGE).
#
#   usage: deploy/build-base-image.sh [MIRROR]        (as root; MIRROR defaults to deb.debian.org)
#
# Needs: root (debootstrap installs packages into a chroot), debootstrap, the docker client
# and a running docker daemon (the root file system is loaded with `docker import`).
# Environment: BASE_IMAGE names the image (default securelp-base:bookworm).
set -euo pipefail

mirror="${1:-http://deb.debian.org/debian}"
image="${BASE_IMAGE:-securelp-base:bookworm}"
suite=bookworm

fail() {
  echo "build-base-image: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] ||
  fail "needs root (debootstrap installs packages into a chroot): run it as root, or as 'sudo $0'"
command -v debootstrap >/dev/null ||
  fail "debootstrap is not installed: apt-get install -y debootstrap"
command -v docker >/dev/null ||
  fail "the docker client is not installed: apt-get install -y docker.io"
docker info >/dev/null 2>&1 ||
  fail "no running docker daemon answers the docker client: start one (as root: 'dockerd > /tmp/dockerd.log 2>&1 &'), or run deploy/smoke.sh, which starts and stops its own"

rootfs="$(mktemp -d /tmp/securelp-rootfs.XXXXXX)"
remove_rootfs() {
  # debootstrap mounts /proc and /sys inside the chroot while it works; an interrupted run can
  # leave them mounted, and a recursive removal must never descend into the host's /proc or /sys
  local mounts
  mounts="$(findmnt -rn -o TARGET | grep -F "$rootfs/" | sort -r || true)"
  if [ -n "$mounts" ]; then
    while read -r m; do umount -l "$m" || true; done <<<"$mounts"
  fi
  rm -rf --one-file-system "$rootfs"
}
trap remove_rootfs EXIT

echo "build-base-image: debootstrap $suite (minbase + python3, python3-venv, ca-certificates) from $mirror"
if ! debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "$suite" "$rootfs" "$mirror"; then
  tail -n 20 "$rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || true
  fail "debootstrap failed (is the Debian mirror $mirror reachable? give another one as the first argument)"
fi
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/*
# an imported file system carries no image configuration: give it the usual PATH so that the
# Dockerfile's `ENV PATH=/opt/securelp/bin:$PATH` extends a complete one
tar --numeric-owner -C "$rootfs" -c . |
  docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$image" >/dev/null
docker image ls "$image"
