#!/usr/bin/env bash
# Start a one-machine OpenPBS cluster inside the PBS root (run through pbs-run.sh, which
# gives this a fresh, empty PBS_HOME and its own host name). Prints nothing but errors.
# The cluster: server, scheduler, comm and one mom exposing the vnodes of five hosts (PBS
# places chunks per host, `resources_available.host`): cn01-cn04, one vnode each (4 cpus,
# 8 GiB), and gn01, a GPU host of two vnodes gn01[0] and gn01[1] (a socket each: 4 cpus,
# 8 GiB, 1 ngpus), only for queue gpuq; CN_VNODES and GN_VNODES change the host counts.
# The mom's natural vnode has 0 cpus. Queues workq (default, walltime ≤ 24 h) and gpuq (≤ 30 min), job history on,
# custom resources ngpus and extsched, a user pbstest. SCHED_SCALE=1 makes PBS's scheduler
# cycle every second (the live benchmark's compressed time); the default is 10 min, plus
# a cycle at each submission and end, as PBS ships.
set -euo pipefail
NAME=$(hostname)
CN_VNODES=${CN_VNODES:-4}  # hosts cn01... of one vnode: 4 cpus and 8 GiB
GN_VNODES=${GN_VNODES:-1}  # hosts gn01... of two vnodes [0] [1]: 4 cpus, 8 GiB, 1 ngpus each; gpuq
die() { echo "pbs start.sh: $*" >&2; exit 1; }
PBS=/opt/pbs
export PATH=$PBS/bin:$PBS/sbin:$PATH

# PBS ignores 127.x addresses: its host name must resolve to the machine's real interface.
IP=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -v '^127\.' | head -n 1 || true)
[ -n "$IP" ] || die "no non-loopback IPv4 address for PBS's host name"
printf '127.0.0.1 localhost\n%s %s\n' "$IP" "$NAME" >/etc/hosts

# A cluster from nothing each time: no job, node or setting of an earlier one.
find /var/spool/pbs -mindepth 1 -delete 2>/dev/null || true
# Jobs' temporary directories of an earlier cluster: a mom finding one of a job id it
# gives again holds that job ("possible security breach of job tmpdir").
rm -rf /var/tmp/pbs.*
cat >/etc/pbs.conf <<EOF
PBS_SERVER=$NAME
PBS_START_SERVER=1
PBS_START_SCHED=1
PBS_START_COMM=1
PBS_START_MOM=1
PBS_EXEC=$PBS
PBS_HOME=/var/spool/pbs
PBS_CORE_LIMIT=unlimited
PBS_SCP=/usr/bin/scp
PBS_LEAF_NAME=$NAME
PBS_MOM_NODE_NAME=$NAME
EOF
"$PBS/libexec/pbs_postinstall" >/var/log/pbs-postinstall.log 2>&1 \
  || die "pbs_postinstall failed (/var/log/pbs-postinstall.log)"
chmod 4755 "$PBS/sbin/pbs_iff" "$PBS/sbin/pbs_rcp"
# Output files are copied locally, never by scp to the host itself.
echo '$usecp *:/ /' >>/var/spool/pbs/mom_priv/config
/etc/init.d/pbs start >/var/log/pbs-start.log 2>&1 || die "PBS did not start: $(tail -n 5 /var/log/pbs-start.log)"

for _ in $(seq 1 60); do qstat -B >/dev/null 2>&1 && break; sleep 0.5; done
qstat -B >/dev/null 2>&1 || die "pbs_server does not answer (log: /var/spool/pbs/server_logs)"
qmgr -c "set server job_history_enable=True"
qmgr -c "create resource ngpus type=long, flag=nh"
qmgr -c "create resource extsched type=string"
defs=$(mktemp)
{
  echo '$configversion 2'
  echo "$NAME: resources_available.ncpus = 0"
  echo "$NAME: resources_available.mem = 0kb"
  for i in $(seq 1 "$CN_VNODES"); do
    n=$(printf 'cn%02d' "$i")
    echo "$n: resources_available.host = $n"
    echo "$n: resources_available.ncpus = 4"
    echo "$n: resources_available.mem = 8gb"
  done
  for i in $(seq 1 "$GN_VNODES"); do
    host=$(printf 'gn%02d' "$i")
    for socket in 0 1; do
      n="$host[$socket]"
      echo "$n: resources_available.host = $host"
      echo "$n: resources_available.ncpus = 4"
      echo "$n: resources_available.mem = 8gb"
      echo "$n: resources_available.ngpus = 1"
    done
  done
} >"$defs"
pbs_mom -s insert testbed_vnodes "$defs" >/dev/null
rm -f "$defs"
sed -i 's/^resources: "ncpus, mem, arch, host, vnode, aoe, eoe"$/resources: "ncpus, mem, arch, host, vnode, aoe, eoe, ngpus"/' \
  /var/spool/pbs/sched_priv/sched_config
kill -HUP "$(cat /var/spool/pbs/mom_priv/mom.lock)" "$(cat /var/spool/pbs/sched_priv/sched.lock)"
qmgr -c "create queue gpuq queue_type=execution,enabled=true,started=true,resources_max.walltime=00:30:00"
qmgr -c "set queue workq resources_max.walltime=24:00:00"
if [ -n "${SCHED_SCALE:-}" ]; then
  qmgr -c "set sched scheduler_iteration=1"
fi
for _ in $(seq 1 60); do pbsnodes -v cn01 >/dev/null 2>&1 && break; sleep 0.5; done
pbsnodes -v cn01 >/dev/null 2>&1 || die "the mom's vnodes did not appear (log: /var/spool/pbs/mom_logs)"
for i in $(seq 1 "$GN_VNODES"); do
  for socket in 0 1; do
    qmgr -c "set node $(printf 'gn%02d' "$i")[$socket] queue=gpuq"
  done
done
for _ in $(seq 1 60); do
  [ "$(pbsnodes -av -F json | python3 -c 'import json,sys; d=json.load(sys.stdin)["nodes"]; print(sum(v["state"]=="free" for v in d.values()))')" -gt $((CN_VNODES + 2 * GN_VNODES)) ] && break
  sleep 0.5
done
id pbstest >/dev/null 2>&1 || useradd -m pbstest
