#!/usr/bin/env bash
# Build (once) a Debian 13 "trixie" root holding Debian's Slurm 24.11 for the 24.11 test bed,
# and print its path. The root is cached outside the clone, under $CPSCHED_CACHE (default
# /var/cache/cpsched), in a folder named by the hash of this script and roots.sh: a later run,
# or CI on the same machine, reuses it; changing either builds a new one. Run as root.
# What is inside: debootstrap's minbase, then Debian 13's Slurm (slurmctld slurmd
# slurm-client slurmdbd slurmrestd munge), the MariaDB client (start.sh drops the test bed database with it),
# and Python 3.13 with venv: the bridge and its tests run inside the root as a site on
# Debian 13 would run them. Daemons are kept from starting while the packages install.
set -euo pipefail
CACHE=${CPSCHED_CACHE:-/var/cache/cpsched}
HERE=$(cd "$(dirname "$0")" && pwd)
KEY=$(cat "$HERE/debian13-root.sh" "$HERE/roots.sh" | sha256sum | cut -c1-12)
ROOT=$CACHE/debian13-slurm-$KEY
PACKAGES="slurmctld slurmd slurm-client slurmdbd slurmrestd munge mariadb-client procps
  python3 python3-venv python3-dev ca-certificates gcc"

die() { echo "debian13-root.sh: $*" >&2; exit 1; }
# shellcheck source=roots.sh
. "$HERE/roots.sh"
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap and chroot need it)"

if [ -f "$ROOT/.complete" ]; then
  echo "$ROOT"
  exit 0
fi

MIRROR=$(debian_mirror)
need_debootstrap
new_build_dir "$CACHE" debian13
echo "building a Debian 13 root with Slurm 24.11 in $ROOT (once; about 3-5 min)..." >&2
debootstrap --variant=minbase trixie "$WORK" "$MIRROR" >"$CACHE/.debootstrap.log" 2>&1 \
  || die "debootstrap trixie failed (log: $CACHE/.debootstrap.log)"
printf '#!/bin/sh\nexit 101\n' >"$WORK/usr/sbin/policy-rc.d"
chmod +x "$WORK/usr/sbin/policy-rc.d"
mount -t proc proc "$WORK/proc"
mount --rbind /dev "$WORK/dev"
chroot "$WORK" env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
  || die "apt-get update in the Debian 13 root failed"
# shellcheck disable=SC2086
chroot "$WORK" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  --no-install-recommends $PACKAGES >"$CACHE/.debian13-apt.log" 2>&1 \
  || die "apt-get install of Slurm 24.11 in the Debian 13 root failed (log: $CACHE/.debian13-apt.log)"
chroot "$WORK" apt-get clean
umount -l "$WORK/dev" "$WORK/proc"
chroot "$WORK" dpkg-query -W -f='${Version}\n' slurmctld >"$WORK/.slurm-version"
install_root "$ROOT"
echo "$ROOT"
