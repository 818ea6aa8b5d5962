#!/usr/bin/env bash
# Start a throw-away single-host Slurm test bed for the bridge's `slurm` tests: Debian 12's
# Slurm 22.05 on the machine, or Debian 13's 24.11 when run inside the root of
# debian13-run.sh. Run as root. Installs the Debian packages when missing. Everything lives under $TB
# (first argument); every daemon's pid is kept under $TB/run so stop.sh stops exactly
# what this started. Adapted from ../shared/slurm/start-testbed.sh.
#   CPU_NODES / GPU_NODES: fake nodes (node1..: 4 CPUs 4000 MB, features skylake,ib on odd
#     ones and icelake on even ones; gpu1..: 8 CPUs 8000 MB gpu:2, features ampere,ib);
#     partitions batch (default) and shadowq over all nodes, cpu (node*, MaxTime 120 min)
#     and gpu (gpu*, MaxTime 60 min, MaxNodes 1)
#   THREADS=2: nodes of 2 hardware threads per core, same CPU counts (node*: 2 cores,
#     gpu*: 4 cores), as on a site with hyper-threading (default 1: one thread per core)
#   CTLD_PORT / SLURMD_BASE_PORT: ports (the fixture picks free ones)
#   KIT_DIR: the bridge's kit (slurm_bridge/kit) to install: its job_submit.lua (holding
#     every job but those of partition shadowq, left to Slurm) and its cpsched-wake as
#     EpilogSlurmctld, both touching $TB/wake ("" = no external-scheduler hold)
#   BRIDGE_USER: a local account the bridge may run as instead of root: created when
#     missing, added to BRIDGE_UIDS in job_submit.lua and, with slurmdbd, given
#     AdminLevel=Operator (the least privilege docs/bridge.md names)
#   WITH_RESTD=1 (default): also slurmrestd on $TB/run/rest.sock
#   PRIORITY=multifactor (default; every factor weighted) or basic (Slurm's FIFO)
#   SCHED_SCALE=1: Slurm's own scheduling at the pace of a workload whose times are
#     compressed (backfill every second at one-second resolution, the main scheduler
#     without its minimum interval) instead of its defaults (bf_interval 30 s,
#     bf_resolution 60 s): the live benchmark's fair baseline
#   WITH_DBD=1 (default): also slurmdbd on DBD_PORT, storing in the MariaDB at
#     MARIADB_HOST:MARIADB_PORT (default 127.0.0.1:3306; root, no password; database
#     slurm_tb_$CTLD_PORT), with limits
#     enforced: account research with users root and nobody, QOS normal and capped
#     (MaxTRESPerUser cpu=4, root only); priority/multifactor with every factor weighted
set -euo pipefail
TB=${1:?usage: start.sh TESTBED_DIR}
CPU_NODES=${CPU_NODES:-2}
GPU_NODES=${GPU_NODES:-2}
CTLD_PORT=${CTLD_PORT:-16817}
SLURMD_BASE_PORT=${SLURMD_BASE_PORT:-17001}
WITH_DBD=${WITH_DBD:-1}
PRIORITY=${PRIORITY:-multifactor}
DBD_PORT=${DBD_PORT:-$((CTLD_PORT + 1))}
KIT_DIR=${KIT_DIR-}
BRIDGE_USER=${BRIDGE_USER-}
THREADS=${THREADS:-1}
SCHED_SCALE=${SCHED_SCALE:-0}
MARIADB_HOST=${MARIADB_HOST:-127.0.0.1}
MARIADB_PORT=${MARIADB_PORT:-3306}
HOST=$(hostname -s)
export SLURM_CONF=$TB/etc/slurm.conf
T0=$(date +%s%N)

die() {
  echo "start.sh: $*" >&2
  tail -n 5 "$TB"/log/slurmctld.log "$TB"/log/slurmdbd.log "$TB"/log/slurmd-*.log >&2 2>/dev/null \
    || true
  sinfo -N -h -o '%N %T %E' >&2 2>/dev/null || true
  exit 1
}
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
WATCH=()  # pid files of daemons started so far: a wait ends as soon as one has died
wait_for() {  # wait_for <seconds> <description> <command...>
  local end=$(( $(date +%s) + $1 )) what=$2 f; shift 2
  while [ "$(date +%s)" -lt "$end" ]; do
    "$@" >/dev/null 2>&1 && return 0
    for f in "${WATCH[@]}"; do
      # a daemon writes its pid file once it runs (on a busy machine, seconds later)
      if [ -f "$f" ] && ! alive "$f"; then
        die "$(basename "$f" .pid) died while waiting for $what"
      fi
    done
    sleep 0.25
  done
  die "timed out after $1 s waiting for $what"
}

[ "$(id -u)" = 0 ] || die "must run as root (slurmd needs it); run the tests as root"

# ---- packages (Debian's Slurm), installed only when missing --------------------------
slurm_missing() {
  ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sinfo >/dev/null || ! command -v munged >/dev/null \
    || { [ "$WITH_DBD" = 1 ] && ! command -v slurmdbd >/dev/null; } \
    || { [ "$WITH_DBD" = 1 ] && ! command -v mariadb >/dev/null; }
}
if slurm_missing; then
  command -v apt-get >/dev/null || die "Slurm is not installed and apt-get is unavailable"
  # Two test beds starting at once (pytest-xdist's workers) install one at a time: the
  # second finds the packages there once the first is done.
  exec 9>/tmp/cpsched-testbed-install.lock
  flock -w 900 9 || die "timed out waiting for another test bed's package install"
fi
if slurm_missing; then
  # keep the packages' maintainer scripts from starting system daemons
  # (a policy-rc.d already there, e.g. a container's own, is left as it is)
  CREATED_POLICY=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
    CREATED_POLICY=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  export DEBIAN_FRONTEND=noninteractive
  echo "installing Debian's Slurm packages (once)..." >&2
  apt-get -o DPkg::Lock::Timeout=600 update -qq || die "apt-get update failed"
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends slurmctld slurmd \
    slurm-client munge slurmrestd slurmdbd mariadb-client >/dev/null \
    || die "apt-get install of Slurm failed"
  trap - EXIT
  if [ -n "$CREATED_POLICY" ]; then rm -f /usr/sbin/policy-rc.d; fi
fi
exec 9>&-

# What differs between the versions: 22.05 serves openapi/v0.0.38 from slurmrestd; 24.11
# has data_parser plugins (v0.0.40-42) behind openapi/slurmctld. Debian 13's MariaDB client
# insists on TLS, which a plain server does not offer: --skip-ssl (22.05's client knows it).
SLURM_VERSION=$(slurmctld -V | awk '{print $2}')
case "$SLURM_VERSION" in
  2[0-2].*|23.0[0-2].*) RESTD_PLUGIN=openapi/v0.0.38 ;;
  *) RESTD_PLUGIN=openapi/slurmctld ;;
esac
MARIADB=(mariadb --skip-ssl -h "$MARIADB_HOST" -P "$MARIADB_PORT" -u root)

for f in "$TB"/run/*.pid "$TB"/munge/munged.pid; do
  alive "$f" && die "already running ($f); run stop.sh first"
done
rm -rf "$TB/state" "$TB/log"
mkdir -p "$TB"/{etc,log,run,munge,dev,jobs,state/ctld}
chmod 755 "$TB" "$TB/munge" "$TB/jobs"

# ---- munge (own key, socket, pid file) -------------------------------------------
dd if=/dev/urandom of="$TB/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$TB/munge/munge.key"
MSOCK=$TB/munge/munge.socket
munged --force --socket="$MSOCK" --key-file="$TB/munge/munge.key" \
  --pid-file="$TB/munge/munged.pid" --log-file="$TB/log/munged.log" \
  --seed-file="$TB/munge/munged.seed"
wait_for 10 munged bash -c "munge -n -S '$MSOCK' | unmunge -S '$MSOCK'"

# ---- configuration ----------------------------------------------------------------
CPU_PARTITION=""; GPU_PARTITION=""
[ "$CPU_NODES" -gt 0 ] && CPU_PARTITION="PartitionName=cpu Nodes=node[1-$CPU_NODES] DefaultTime=10 MaxTime=120 State=UP"
[ "$GPU_NODES" -gt 0 ] && GPU_PARTITION="PartitionName=gpu Nodes=gpu[1-$GPU_NODES] DefaultTime=10 MaxTime=60 MaxNodes=1 State=UP"
NODES=(); NODELINES=""; port=$SLURMD_BASE_PORT
[ "$THREADS" -ge 1 ] && [ $((4 % THREADS)) -eq 0 ] \
  || die "THREADS=$THREADS: it must divide the nodes' 4 and 8 CPUs"
layout() {  # the CPUs= of a node of $1 CPUs, in cores of $THREADS threads
  if [ "$THREADS" -gt 1 ]; then
    echo "CPUs=$1 Sockets=1 CoresPerSocket=$(($1 / THREADS)) ThreadsPerCore=$THREADS"
  else
    echo "CPUs=$1"
  fi
}
for i in $(seq 1 "$CPU_NODES"); do
  NODES+=("node$i")
  NODELINES+="NodeName=node$i NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$port $(layout 4) RealMemory=4000 Features=$( ((i % 2)) && echo skylake,ib || echo icelake ) State=UNKNOWN"$'\n'
  port=$((port + 1))
done
for i in $(seq 1 "$GPU_NODES"); do
  NODES+=("gpu$i")
  NODELINES+="NodeName=gpu$i NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$port $(layout 8) RealMemory=8000 Gres=gpu:2 Features=ampere,ib State=UNKNOWN"$'\n'
  port=$((port + 1))
done
PRIORITY_LINES="PriorityType=priority/basic"
if [ "$PRIORITY" = multifactor ]; then
  PRIORITY_LINES="PriorityType=priority/multifactor
PriorityMaxAge=1-0
PriorityWeightAge=1000
PriorityWeightFairShare=10000
PriorityWeightJobSize=1000
PriorityWeightPartition=1000
PriorityWeightQOS=2000"
fi
ACCOUNTING="AccountingStorageType=accounting_storage/none"
if [ "$WITH_DBD" = 1 ]; then
  ACCOUNTING="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$MSOCK
AccountingStorageEnforce=associations,limits,qos"
  # slurmdbd wants its file private to SlurmUser
  cat > "$TB/etc/slurmdbd.conf" <<DBD
AuthType=auth/munge
AuthInfo=socket=$MSOCK
DbdAddr=127.0.0.1
DbdHost=$HOST
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$TB/log/slurmdbd.log
PidFile=$TB/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=$MARIADB_HOST
StoragePort=$MARIADB_PORT
StorageUser=root
StorageLoc=slurm_tb_$CTLD_PORT
DBD
  chmod 600 "$TB/etc/slurmdbd.conf"
fi
SCHED_PARAMETERS=batch_sched_delay=0
if [ "$SCHED_SCALE" = 1 ]; then
  SCHED_PARAMETERS+=",bf_interval=1,bf_resolution=1,sched_min_interval=0,sched_interval=1"
fi
JOBSUBMIT=""; EPILOG=""
if [ -n "$KIT_DIR" ]; then
  BRIDGE_UIDS="[0] = true"
  if [ -n "$BRIDGE_USER" ]; then
    id -u "$BRIDGE_USER" >/dev/null 2>&1 \
      || useradd --system --no-create-home --shell /usr/sbin/nologin "$BRIDGE_USER"
    BRIDGE_UIDS+=", [$(id -u "$BRIDGE_USER")] = true"
  fi
  sed -e 's/^local UNMANAGED_PARTITIONS = {}/local UNMANAGED_PARTITIONS = { shadowq = true }/' \
      -e "s#/var/lib/cpsched-bridge/wake#$TB/wake#" \
      -e "s/^local BRIDGE_UIDS = { \[0\] = true }/local BRIDGE_UIDS = { $BRIDGE_UIDS }/" \
      "$KIT_DIR/job_submit.lua" > "$TB/etc/job_submit.lua"
  grep -qF "local BRIDGE_UIDS = { $BRIDGE_UIDS }" "$TB/etc/job_submit.lua" \
    || die "job_submit.lua: BRIDGE_UIDS line not found"
  # a copy of the kit's script: slurmctld may see another file tree than the kit's
  cp "$KIT_DIR/cpsched-wake" "$TB/cpsched-wake.kit"
  printf '#!/bin/sh\nCPSCHED_WAKE_FILE=%s exec sh %s\n' "$TB/wake" "$TB/cpsched-wake.kit" \
    > "$TB/cpsched-wake"
  chmod 755 "$TB/cpsched-wake"
  JOBSUBMIT="JobSubmitPlugins=lua"; EPILOG="EpilogSlurmctld=$TB/cpsched-wake"
fi

cat > "$TB/etc/slurm.conf" <<CONF
ClusterName=testbed
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_BASE_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MSOCK
StateSaveLocation=$TB/state/ctld
SlurmdSpoolDir=$TB/state/d/%n
SlurmctldPidFile=$TB/run/slurmctld.pid
SlurmdPidFile=$TB/run/slurmd-%n.pid
SlurmctldLogFile=$TB/log/slurmctld.log
SlurmdLogFile=$TB/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
$ACCOUNTING
JobCompType=jobcomp/filetxt
JobCompLoc=$TB/log/jobcomp.txt
$JOBSUBMIT
$EPILOG
SchedulerType=sched/backfill
SchedulerParameters=$SCHED_PARAMETERS
$PRIORITY_LINES
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
SlurmdParameters=config_overrides
ReturnToService=2
GresTypes=gpu
KillWait=5
MinJobAge=300
$NODELINES
PartitionName=batch Nodes=ALL Default=YES DefaultTime=10 MaxTime=INFINITE State=UP
# left to Slurm's own scheduler by the tests' job_submit.lua (shadow-mode tests)
PartitionName=shadowq Nodes=ALL Default=NO DefaultTime=10 MaxTime=INFINITE State=UP
# two partitions with their own node sets and limits (the site-policy tests)
$CPU_PARTITION
$GPU_PARTITION
CONF

# 24.11's slurmd starts a cgroup plugin whatever ProctrackType says; a test bed (a root
# without cgroups mounted) turns it off. 22.05 reads no cgroup.conf here.
if [ "$RESTD_PLUGIN" != openapi/v0.0.38 ]; then
  echo "CgroupPlugin=disabled" > "$TB/etc/cgroup.conf"
fi

# fake GPUs: gres/gpu needs File= entries that are character devices -> symlinks to /dev/null
ln -sf /dev/null "$TB/dev/gpu0"; ln -sf /dev/null "$TB/dev/gpu1"
if [ "$GPU_NODES" -gt 0 ]; then
  printf 'AutoDetect=off\nNodeName=gpu[1-%s] Name=gpu File=%s/dev/gpu[0-1]\n' \
    "$GPU_NODES" "$TB" > "$TB/etc/gres.conf"
else
  : > "$TB/etc/gres.conf"
fi
echo "export SLURM_CONF=$SLURM_CONF" > "$TB/env.sh"

# ---- slurmdbd and the accounts, limits and QOS the site-policy tests use -----------
if [ "$WITH_DBD" = 1 ]; then
  "${MARIADB[@]}" -e "DROP DATABASE IF EXISTS slurm_tb_$CTLD_PORT" \
    || die "no MariaDB server answers on $MARIADB_HOST:$MARIADB_PORT (root, no password):" \
      "slurmdbd stores there; start one or set MARIADB_HOST/MARIADB_PORT"
  slurmdbd
  WATCH+=("$TB/run/slurmdbd.pid")
  wait_for 60 slurmdbd timeout 5 sacctmgr -n show cluster
  sacctmgr -i add cluster testbed >/dev/null
  sacctmgr -i add account research cluster=testbed >/dev/null
  sacctmgr -i add qos capped MaxTRESPerUser=cpu=4 Priority=100 >/dev/null
  sacctmgr -i modify qos normal set Priority=50 >/dev/null
  sacctmgr -i add user root account=research cluster=testbed qos=normal,capped \
    defaultqos=normal >/dev/null
  sacctmgr -i modify user root set defaultaccount=research >/dev/null
  sacctmgr -i add user nobody account=research cluster=testbed >/dev/null  # a plain user
  if [ -n "$BRIDGE_USER" ]; then
    sacctmgr -i add user "$BRIDGE_USER" account=research cluster=testbed \
      adminlevel=operator >/dev/null
  fi
fi

# ---- slurmctld, then one slurmd per fake node (each daemonizes and writes its pid) --
slurmctld -i
WATCH+=("$TB/run/slurmctld.pid")
wait_for 30 slurmctld bash -c "scontrol ping | grep -q 'is UP'"
for n in "${NODES[@]}"; do
  mkdir -p "$TB/state/d/$n"
  slurmd -N "$n" || die "slurmd $n did not start: $(tail -n 3 "$TB/log/slurmd-$n.log" 2>/dev/null)"
done
nodes_up() { ! sinfo -h -N -o '%T' | grep -qvE '^(idle|mixed|allocated|completing)$'; }
wait_for 120 "all nodes up" nodes_up

# ---- slurmrestd on a unix socket (optional: the bridge's rest state source) ----------
if [ "${WITH_RESTD:-1}" = 1 ] && command -v slurmrestd >/dev/null; then
  SLURMRESTD_SECURITY=disable_user_check nohup slurmrestd -s "$RESTD_PLUGIN" \
    -a rest_auth/local "unix:$TB/run/rest.sock" > "$TB/log/slurmrestd.log" 2>&1 &
  echo $! > "$TB/run/slurmrestd.pid"
  wait_for 20 slurmrestd test -S "$TB/run/rest.sock"
fi

echo "testbed (Slurm $SLURM_VERSION) up in $(( ($(date +%s%N) - T0) / 1000000 )) ms: ${NODES[*]}"
