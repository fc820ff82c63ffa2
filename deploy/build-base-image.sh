#!/usr/bin/env bash
# Build the local base image securelp-base:bookworm with debootstrap (no registry needed,
# only a Debian mirror). Needs root, debootstrap and a running docker daemon.
#   usage: sudo deploy/build-base-image.sh [MIRROR]
set -euo pipefail
mirror="${1:-http://deb.debian.org/debian}"
rootfs="$(mktemp -d /tmp/securelp-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$mirror"
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import - securelp-base:bookworm
docker image ls securelp-base:bookworm
