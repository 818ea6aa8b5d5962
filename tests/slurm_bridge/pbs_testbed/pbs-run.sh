#!/usr/bin/env bash
# Run a command inside the OpenPBS root built by pbs-root.sh, as a site's PBS head node runs
# the bridge: PBS's own commands, Debian 12's Python. The clone, ../shared and /tmp are seen
# inside at the same paths; the root's Python environment (cpsched with [dev], cached in the
# root, keyed by pyproject.toml) is first on PATH. The root gets its own host name (PBS's
# server name, which must resolve to a real interface) and a fresh, empty PBS_HOME: the
# command's tests start and stop PBS there (start.sh, stop.sh). PBS runs in mount, UTS, PID
# and network namespaces of its own (its address 10.77.0.1 on a veth pair; no way out):
# it is stopped when the command ends, whatever it left running ends with the namespace,
# and its fixed ports meet no other PBS on the machine. Run as root; needs ip (iproute2).
#   pbs-run.sh pytest -m pbs tests/slurm_bridge     the real-PBS tests
#   pbs-run.sh bash                                 a shell in the root
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
SHARED=$(cd "$REPO/.." && pwd)/shared

die() { echo "pbs-run.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (chroot and mounts need it)"
[ $# -gt 0 ] || die "usage: pbs-run.sh COMMAND [ARGS...]"
command -v unshare >/dev/null || die "unshare (util-linux) is missing"
command -v ip >/dev/null || die "ip is missing: apt-get install iproute2"

ROOT=$(bash "$HERE/pbs-root.sh") || die "no OpenPBS root (see above)"
KEY=$(cat "$REPO/pyproject.toml" "$ROOT/.pbs-version" | sha256sum | cut -c1-12)
VENV=/opt/cpsched-venv-$KEY

cd "$REPO"
in_root() {
  chroot "$ROOT" /usr/bin/env -u VIRTUAL_ENV -u PIP_FIND_LINKS \
    PATH="$VENV/bin:/opt/pbs/bin:/opt/pbs/sbin:/usr/sbin:/usr/bin:/sbin:/bin" "$@"
}
export -f in_root
export ROOT VENV

# First, with the machine's network: cpsched's environment in the root (it downloads the
# first time), in a mount namespace of its own.
unshare --mount --propagation private -- bash -c '
  set -euo pipefail
  die() { echo "pbs-run.sh: $*" >&2; exit 1; }
  . "$1/tests/slurm_bridge/testbed/roots.sh"
  mount_into_root "$ROOT" "$1" "$2" /etc/resolv.conf /etc/ssl/certs/ca-certificates.crt
  root_venv "$VENV" "$1" OpenPBS' sh "$REPO" "$SHARED"

# Then PBS and the command in network, mount, UTS and PID namespaces of their own: PBS's
# fixed ports (15001-15007, 17001) cannot meet another PBS or test run on the machine,
# its host name resolves to an address of its own (PBS ignores loopback addresses), and
# whatever it leaves running ends with the command.
exec unshare --mount --uts --pid --net --fork --propagation private -- \
  bash -s "$ROOT" "$REPO" "$SHARED" "$@" <<'INNER'
set -euo pipefail
ROOT=$1 REPO=$2 SHARED=$3
shift 3
hostname pbshead
ip link set lo up
ip link add pbs0 type veth peer name pbs1
ip addr add 10.77.0.1/24 dev pbs0
ip link set pbs0 up
ip link set pbs1 up
# shellcheck source=../testbed/roots.sh
. "$REPO/tests/slurm_bridge/testbed/roots.sh"
mount_into_root "$ROOT" "$REPO" "$SHARED" /etc/ssl/certs/ca-certificates.crt
mkdir -p "$ROOT/var/spool/pbs"
mount -t tmpfs -o mode=0755 tmpfs "$ROOT/var/spool/pbs"
stop_pbs() { in_root bash "$REPO/tests/slurm_bridge/pbs_testbed/stop.sh" || true; }
trap stop_pbs EXIT
in_root sh -c 'cd "$1" && shift && exec "$@"' sh "$REPO" "$@"
INNER
