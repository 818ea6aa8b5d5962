#!/usr/bin/env bash
# Stop what start.sh started, using only its pid files (never kill by name).
set -uo pipefail
TB=${1:?usage: stop.sh TESTBED_DIR}
export SLURM_CONF=$TB/etc/slurm.conf

stop_group() {  # stop_group <comm> <pidfile>...: TERM all, wait up to 15 s, then KILL
  local comm=$1 f pid pids=(); shift
  for f in "$@"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    # only signal the pid if it is still the daemon we started (guards against pid reuse)
    if [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$comm" ]; then
      kill -TERM "$pid" && pids+=("$pid")
    fi
    rm -f "$f"
  done
  for _ in $(seq 60); do
    local left=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
    pids=("${left[@]}"); [ ${#pids[@]} -eq 0 ] && return 0
    sleep 0.25
  done
  echo "killing $comm ${pids[*]}"; kill -KILL "${pids[@]}"
}

# cancel all jobs through Slurm first so the slurmds reap their slurmstepd processes
if [ -f "$TB/run/slurmctld.pid" ] && kill -0 "$(cat "$TB/run/slurmctld.pid")" 2>/dev/null; then
  ids=$(squeue -h -o %i 2>/dev/null || true)
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    scancel $ids 2>/dev/null || true
    for _ in $(seq 80); do
      [ -z "$(squeue -h -t running,completing,suspended -o %i 2>/dev/null)" ] && break
      sleep 0.25
    done
  fi
fi
stop_group slurmrestd "$TB/run/slurmrestd.pid"
stop_group slurmd "$TB"/run/slurmd-*.pid
stop_group slurmctld "$TB/run/slurmctld.pid"
stop_group slurmdbd "$TB/run/slurmdbd.pid"
if [ -f "$TB/etc/slurmdbd.conf" ]; then
  db=$(sed -n 's/^StorageLoc=//p' "$TB/etc/slurmdbd.conf")
  host=$(sed -n 's/^StorageHost=//p' "$TB/etc/slurmdbd.conf")
  port=$(sed -n 's/^StoragePort=//p' "$TB/etc/slurmdbd.conf")
  [ -n "$db" ] && mariadb --skip-ssl -h "${host:-127.0.0.1}" -P "${port:-3306}" -u root \
    -e "DROP DATABASE IF EXISTS $db" 2>/dev/null
fi
stop_group munged "$TB/munge/munged.pid"
rm -f "$TB/run/rest.sock"
echo "testbed stopped"
