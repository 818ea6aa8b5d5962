#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12 machine, timed: a new root made with
# debootstrap (minbase), python3 the only package added by hand, a clone of this
# repository's HEAD and ../shared copied in; then `./dev run` and `CI=true ./dev test`
# inside it, each as a newcomer would type it. Run as root; about 30-40 min on 2 cores.
#   bench/fresh_machine.sh [ROOT]     (default /var/tmp/cpsched-fresh-debian12; removed first)
# What the root shares with the machine: the kernel, the network (so the machine's own
# PostgreSQL and MariaDB stay reachable on 5432/3306: the connection counters of both are
# printed before and after, and must not move if the tests use only their own servers),
# /etc/hosts, the resolver, the trusted certificates and the variables that tell pip and
# Python to use them (a site's proxy CA, and the proxy if one is set). Nothing else
# should run meanwhile, or the counters say nothing.
set -euo pipefail
ROOT=${1:-/var/tmp/cpsched-fresh-debian12}
REPO=$(cd "$(dirname "$0")/.." && pwd)
SHARED=$(cd "$REPO/.." && pwd)/shared

die() { echo "fresh_machine.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap and chroot need it)"
command -v debootstrap >/dev/null || die "apt-get install debootstrap"

MIRROR=$(sed -n -E 's#^(URIs:|deb)[[:space:]]+(\[[^]]*\][[:space:]]+)?(https?://[^ ]+/debian)/?([[:space:]].*)?$#\3#p' \
  /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -n 1 || true)
MIRROR=${MIRROR:-http://deb.debian.org/debian}

# Connections the machine's own servers have taken so far (sessions: PostgreSQL 14+).
server_counters() {
  local pg my
  pg=$(psql -h 127.0.0.1 -U postgres -d postgres -tAc \
    "select sum(sessions) from pg_stat_database" 2>/dev/null || echo "unreachable")
  my=$(mariadb -h 127.0.0.1 -u root -N -e "show global status like 'Connections'" \
    2>/dev/null | cut -f2 || echo "unreachable")
  echo "machine's PostgreSQL sessions: $pg; machine's MariaDB connections: $my" \
    "(this reading adds one to each)"
}

elapsed() { echo "$(( $(date +%s) - $1 )) s"; }

for m in dev/pts dev proc sys/fs/cgroup sys tmp; do umount -l "$ROOT/$m" 2>/dev/null || true; done
rm -rf --one-file-system "$ROOT"
t0=$(date +%s)
echo "== debootstrap bookworm (minbase) into $ROOT from $MIRROR"
debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >/dev/null
echo "   $(elapsed "$t0")"

server_counters
# One private mount namespace for everything below: nothing stays mounted afterwards.
unshare --mount --propagation private -- bash -s "$ROOT" "$REPO" "$SHARED" <<'INNER'
set -euo pipefail
ROOT=$1 REPO=$2 SHARED=$3
# Its / a mount point, as a booted machine's is (unshare --propagation needs one).
mount --bind "$ROOT" "$ROOT"
mount -t proc proc "$ROOT/proc"
mount --rbind /sys "$ROOT/sys"  # with its cgroup file system, as a booted machine has
mount --rbind /dev "$ROOT/dev"
for f in /etc/hosts /etc/resolv.conf; do cp "$f" "$ROOT$f"; done
# The site's own CAs, where update-ca-certificates (run by any package that pulls in
# ca-certificates) keeps them in the bundle; and the bundle itself until then.
mkdir -p "$ROOT/etc/ssl/certs" "$ROOT/usr/local/share/ca-certificates"
cp -a /usr/local/share/ca-certificates/. "$ROOT/usr/local/share/ca-certificates/" 2>/dev/null || true
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
# The network's own requirements come along: where its egress re-signs TLS (a site's
# proxy), the machine tells pip and Python which CA bundle to trust.
NETWORK_ENV=()
for var in PIP_CERT SSL_CERT_FILE REQUESTS_CA_BUNDLE http_proxy https_proxy no_proxy; do
  [ -n "${!var:-}" ] && NETWORK_ENV+=("$var=${!var}")
done
inside() {
  chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb "${NETWORK_ENV[@]}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }

t=$(date +%s)
echo "== by hand: apt-get install python3"
inside apt-get update -qq
inside env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >/dev/null
inside python3 --version
# apt may have installed ca-certificates beside python3 and rebuilt the bundle.
[ -x "$ROOT/usr/sbin/update-ca-certificates" ] && inside update-ca-certificates >/dev/null 2>&1
grep -q . "$ROOT/etc/ssl/certs/ca-certificates.crt" 2>/dev/null \
  || cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
echo "   $(elapsed "$t")"

mkdir -p "$ROOT/work"
git clone -q "$REPO" "$ROOT/work/main"
cp -a "$SHARED" "$ROOT/work/shared"
echo "== the clone: $(git -C "$ROOT/work/main" log --oneline -1)"

t=$(date +%s)
echo "== ./dev run"
inside sh -c 'cd /work/main && ./dev run' >"$ROOT/work/dev-run.log" 2>&1 \
  && echo "   ./dev run: exit 0, $(elapsed "$t")" \
  || { echo "   ./dev run: FAILED, $(elapsed "$t")"; tail -n 30 "$ROOT/work/dev-run.log"; }
grep -E "^(SAME|DIFFERENT)|mean bounded slowdown|verdict" "$ROOT/work/dev-run.log" | head -n 10 || true

t=$(date +%s)
echo "== CI=true ./dev test"
inside sh -c 'cd /work/main && CI=true ./dev test' >"$ROOT/work/dev-test.log" 2>&1 \
  && echo "   CI=true ./dev test: exit 0, $(elapsed "$t")" \
  || { echo "   CI=true ./dev test: FAILED, $(elapsed "$t")"; }
grep -E "passed|failed|error|skipped" "$ROOT/work/dev-test.log" | tail -n 6 || true
INNER
server_counters
echo "== total $(elapsed "$t0"); logs in $ROOT/work/dev-run.log and dev-test.log"
