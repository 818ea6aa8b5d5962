#!/usr/bin/env bash
# Run a command inside the Debian 13 root (Slurm 24.11, Python 3.13) built by
# debian13-root.sh, as a site on Debian 13 runs the bridge: its own Slurm commands, its own
# Python. The clone, ../shared and /tmp are seen inside at the same paths, and the root's
# Python environment (cpsched with [dev], cached in the root beside the packages, keyed by
# pyproject.toml) is first on PATH. Everything is mounted in a private mount namespace, so
# nothing stays mounted after the command ends. Run as root.
#   debian13-run.sh pytest -m slurm tests/slurm_bridge     the real-Slurm tests on 24.11
#   debian13-run.sh bash                                   a shell in the root
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
SHARED=$(cd "$REPO/.." && pwd)/shared

die() { echo "debian13-run.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (chroot and mounts need it)"
[ $# -gt 0 ] || die "usage: debian13-run.sh COMMAND [ARGS...]"
command -v unshare >/dev/null || die "unshare (util-linux) is missing"

ROOT=$(bash "$HERE/debian13-root.sh") || die "no Debian 13 root (see above)"
KEY=$(cat "$REPO/pyproject.toml" "$ROOT/.slurm-version" | sha256sum | cut -c1-12)
VENV=/opt/cpsched-venv-$KEY

# slurmdbd stores in a MariaDB the tests start on the machine (Debian 12's 10.11), not in
# the root's: Debian 13's slurmdbd 24.11.5 dies at start against its MariaDB 11.8
# ("select @var := concat('')": client error 5027). The root shares the machine's network.
[ -x "$REPO/.venv/bin/python" ] || die "no .venv: run ./dev setup first"
BESIDE=("$REPO/.venv/bin/python" -m tests.dbservers mariadb --)

# Inside a private mount namespace: the machine's own mounts are untouched and everything
# below goes when the last process started here ends.
cd "$REPO"
exec "${BESIDE[@]}" unshare --mount --propagation private -- \
  bash -s "$ROOT" "$REPO" "$SHARED" "$VENV" "$@" <<'INNER'
set -euo pipefail
ROOT=$1 REPO=$2 SHARED=$3 VENV=$4
shift 4
# shellcheck source=roots.sh
. "$REPO/tests/slurm_bridge/testbed/roots.sh"
# The machine's name, resolver and trusted certificates (a site's proxy CA included) hold
# inside as well.
mount_into_root "$ROOT" "$REPO" "$SHARED" /etc/hosts /etc/resolv.conf \
  /etc/ssl/certs/ca-certificates.crt
in_root() { chroot "$ROOT" /usr/bin/env -u VIRTUAL_ENV -u PIP_FIND_LINKS PATH="$VENV/bin:/usr/sbin:/usr/bin:/sbin:/bin" "$@"; }
root_venv "$VENV" "$REPO" "Debian 13"
cd "$REPO"
in_root sh -c 'cd "$1" && shift && exec "$@"' sh "$REPO" "$@"
INNER
