#!/usr/bin/env bash
# Run a command inside the OpenPBS root built by pbs-root.sh, as a site's PBS head node runs
# the bridge: PBS's own commands, Debian 12's Python. The clone, ../shared and /tmp are seen
# inside at the same paths; the root's Python environment (cpsched with [dev], cached in the
# root, keyed by pyproject.toml) is first on PATH. The root gets its own host name (PBS's
# server name, which must resolve to a real interface) and a fresh, empty PBS_HOME: the
# command's tests start and stop PBS there (start.sh, stop.sh). Everything is mounted in a
# private mount namespace and PID namespace: PBS is stopped when the command ends, and
# whatever it left running ends with the namespace. Run as root.
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

ROOT=$(bash "$HERE/pbs-root.sh") || die "no OpenPBS root (see above)"
KEY=$(cat "$REPO/pyproject.toml" "$ROOT/.pbs-version" | sha256sum | cut -c1-12)
VENV=/opt/cpsched-venv-$KEY

cd "$REPO"
exec unshare --mount --uts --pid --fork --propagation private -- \
  bash -s "$ROOT" "$REPO" "$SHARED" "$VENV" "$@" <<'INNER'
set -euo pipefail
ROOT=$1 REPO=$2 SHARED=$3 VENV=$4
shift 4
hostname pbshead
# shellcheck source=../testbed/roots.sh
. "$REPO/tests/slurm_bridge/testbed/roots.sh"
# The machine's resolver and trusted certificates; its own /etc/hosts (PBS's server name).
mount_into_root "$ROOT" "$REPO" "$SHARED" /etc/resolv.conf /etc/ssl/certs/ca-certificates.crt
mkdir -p "$ROOT/var/spool/pbs"
mount -t tmpfs -o mode=0755 tmpfs "$ROOT/var/spool/pbs"
in_root() {
  chroot "$ROOT" /usr/bin/env -u VIRTUAL_ENV -u PIP_FIND_LINKS \
    PATH="$VENV/bin:/opt/pbs/bin:/opt/pbs/sbin:/usr/sbin:/usr/bin:/sbin:/bin" "$@"
}
stop_pbs() { in_root bash "$REPO/tests/slurm_bridge/pbs_testbed/stop.sh" || true; }
trap stop_pbs EXIT
root_venv "$VENV" "$REPO" "OpenPBS"
in_root sh -c 'cd "$1" && shift && exec "$@"' sh "$REPO" "$@"
INNER
