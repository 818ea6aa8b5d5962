#!/usr/bin/env bash
# Build (once) a Debian 12 root holding OpenPBS built from ../shared/pbs/openpbs-src.tar.gz,
# for the real-PBS tests, and print its path. Cached outside the clone under $CPSCHED_CACHE
# (default /var/cache/cpsched) in a folder named by the hashes of this script, roots.sh and
# the source tarball: a later run, or CI on the same machine, reuses it. Run as root.
# Inside: debootstrap's minbase, PBS's build and run dependencies (Debian 12 packages; PBS's
# data service runs Debian's PostgreSQL on port 15007), OpenPBS in /opt/pbs, Python 3.11
# with venv (the bridge and its tests run inside the root, beside PBS's commands). Daemons
# are kept from starting while the packages install. A root of its own keeps PBS's
# /etc/hosts entry, /etc/pbs.conf and -dev packages off the machine.
set -euo pipefail
CACHE=${CPSCHED_CACHE:-/var/cache/cpsched}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../../../.." && pwd)/shared/pbs/openpbs-src.tar.gz
die() { echo "pbs-root.sh: $*" >&2; exit 1; }
# shellcheck source=../testbed/roots.sh
. "$HERE/../testbed/roots.sh"
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap and chroot need it)"
[ -f "$SRC" ] || die "no OpenPBS source at $SRC (../shared/pbs/openpbs-src.tar.gz)"
LIB=$HERE/../testbed/roots.sh
KEY=$(cat "$HERE/pbs-root.sh" "$LIB" "$SRC" | sha256sum | cut -c1-12)
ROOT=$CACHE/debian12-openpbs-$KEY
BUILD_DEPS="gcc g++ make libtool autoconf automake perl swig libhwloc-dev libx11-dev
  libxt-dev libxext-dev libxft-dev libedit-dev libical-dev libncurses-dev libexpat1-dev
  libssl-dev libcjson-dev tcl-dev tk-dev python3-dev postgresql-server-dev-all"
RUN_DEPS="postgresql postgresql-contrib expat libical3 sudo procps openssh-client
  hostname python3 python3-venv ca-certificates"

if [ -f "$ROOT/.complete" ]; then
  echo "$ROOT"
  exit 0
fi

MIRROR=$(debian_mirror)
need_debootstrap
new_build_dir "$CACHE" openpbs
LOG=$CACHE/.openpbs-build.log
: >"$LOG"
echo "building a Debian 12 root with OpenPBS in $ROOT (once; about 8-15 min on 2 cores)..." >&2
debootstrap --variant=minbase bookworm "$WORK" "$MIRROR" >>"$LOG" 2>&1 \
  || die "debootstrap bookworm failed (log: $LOG)"
printf '#!/bin/sh\nexit 101\n' >"$WORK/usr/sbin/policy-rc.d"
chmod +x "$WORK/usr/sbin/policy-rc.d"
mount -t proc proc "$WORK/proc"
mount -t sysfs sysfs "$WORK/sys"
mount --rbind /dev "$WORK/dev"
in_root() { chroot "$WORK" /usr/bin/env -i HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
  PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
in_root apt-get update -qq >>"$LOG" 2>&1 || die "apt-get update in the root failed (log: $LOG)"
# shellcheck disable=SC2086
in_root apt-get install -y -qq --no-install-recommends $BUILD_DEPS $RUN_DEPS >>"$LOG" 2>&1 \
  || die "apt-get install of PBS's dependencies failed (log: $LOG)"
mkdir -p "$WORK/usr/src"
tar -xzf "$SRC" -C "$WORK/usr/src"
[ -d "$WORK/usr/src/openpbs" ] || die "the tarball has no top folder openpbs/"
# --with-python=/usr: configure embeds the first python on PATH, never a pyenv shim.
in_root sh -c 'cd /usr/src/openpbs && ./autogen.sh && ./configure --prefix=/opt/pbs \
  --with-python=/usr && make -j"$(nproc)" && make install' >>"$LOG" 2>&1 \
  || die "building OpenPBS failed (log: $LOG)"
rm -rf "$WORK/usr/src/openpbs"
in_root apt-get clean
for m in dev proc sys; do umount -l "$WORK/$m"; done
/usr/bin/env -i PATH=/usr/bin:/bin chroot "$WORK" /opt/pbs/bin/qstat --version \
  >"$WORK/.pbs-version" 2>&1 || true
install_root "$ROOT"
echo "$ROOT"
