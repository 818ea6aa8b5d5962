# Shared by the test beds' Debian roots (sourced, not run): the Slurm 24.11 root
# (debian13-root.sh, debian13-run.sh) and the OpenPBS root (../pbs_testbed/pbs-root.sh,
# pbs-run.sh). Each caller defines die().

# The Debian mirror this machine's apt already uses (debootstrap needs one by name).
debian_mirror() {
  local found
  found=$(sed -n -E 's#^(URIs:|deb)[[:space:]]+(\[[^]]*\][[:space:]]+)?(https?://[^ ]+/debian)/?([[:space:]].*)?$#\3#p' \
    /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -n 1 || true)
  echo "${found:-http://deb.debian.org/debian}"
}

# debootstrap, installed from Debian's packages when missing.
need_debootstrap() {
  command -v debootstrap >/dev/null && return 0
  command -v apt-get >/dev/null || die "debootstrap is missing and apt-get is unavailable"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq \
    || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends debootstrap >/dev/null || die "apt-get install debootstrap failed"
}

# A build folder beside the cache entry (WORK), removed on exit unless renamed into place:
# a run killed half-way leaves no root that looks complete. $1: the cache, $2: a name.
new_build_dir() {
  mkdir -p "$1"
  WORK=$(mktemp -d "$1/.$2-build.XXXXXX")
  chmod 755 "$WORK"  # mktemp's 0700 would keep the root's own users (munge, postgres) out
  trap 'for m in dev/pts dev proc sys; do umount -l "$WORK/$m" 2>/dev/null || true; done
        rm -rf --one-file-system "$WORK"' EXIT
}

# Inside a private mount namespace: the machine's file systems, /tmp, the clone and
# ../shared (same paths) mounted into root $1; $2 the clone, $3 ../shared, then the files
# of /etc to share with the machine (its name, resolver, trusted certificates...).
mount_into_root() {
  local root=$1 repo=$2 shared=$3 f dir
  shift 3
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount --rbind /dev "$root/dev"
  mount --bind /tmp "$root/tmp"
  for f in "$@"; do
    [ -e "$f" ] && touch "$root$f" && mount --bind "$f" "$root$f"
  done
  for dir in "$repo" "$shared"; do
    [ -d "$dir" ] || continue
    mkdir -p "$root$dir"
    mount --bind "$dir" "$root$dir"
  done
}

# cpsched's Python environment in the root (in_root must be defined): dependencies once
# (online), cpsched itself every run, as an editable install of the clone (no download:
# build isolation off). $1: the venv's path inside the root, $2 the clone, $3 a label.
root_venv() {
  local venv=$1 repo=$2
  if [ ! -f "$ROOT$venv/.complete" ]; then
    echo "setting up cpsched's environment in the $3 root (once; about 2-3 min)..." >&2
    rm -rf "$ROOT$venv"
    in_root python3 -m venv "$venv"
    in_root "$venv/bin/python" -m pip install -q --disable-pip-version-check \
      'setuptools>=77' wheel
    in_root sh -c "cd '$repo' && '$venv/bin/python' -m pip install -q \
      --disable-pip-version-check --no-build-isolation -e '.[dev]'"
    touch "$ROOT$venv/.complete"
  fi
  in_root sh -c "cd '$repo' && '$venv/bin/python' -m pip install -q \
    --disable-pip-version-check --no-deps --no-build-isolation -e ." >/dev/null
}

# The finished root $1 put in place; older roots of the same kind beside it (other keys:
# an earlier version of the scripts) removed unless something has them mounted.
install_root() {
  local root=$1 old
  touch "$WORK/.complete"
  mv "$WORK" "$root"
  trap - EXIT
  for old in "${root%-*}"-*; do
    [ "$old" = "$root" ] || [ ! -d "$old" ] && continue
    grep -q " $old/" /proc/mounts && continue
    rm -rf --one-file-system "$old"
  done
}
