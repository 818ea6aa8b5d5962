#!/usr/bin/env bash
# Record the real outputs the PBS unit tests read (tests/slurm_bridge/fixtures/pbs/), from
# the OpenPBS test bed with the kit's hook installed. Run through pbs-run.sh:
#   tests/slurm_bridge/pbs_testbed/pbs-run.sh bash tests/slurm_bridge/pbs_testbed/record.sh
# The jobs: held by the hook (plain, -q workq, select=3 chunks, place=scatter:excl, pack),
# running on vnodes started with qrun -H (one on gn01 in gpuq), held by their user, waiting
# on a dependency, an array, ended with exit 0 and 3, deleted before it started, killed at
# its walltime; a stopped queue and a route queue; cn04 offline; on the two-vnode GPU host
# gn01, a running chunk split over both vnodes and held scatter and vscatter jobs; an
# advance reservation (pbs_rsub) with a job in its queue, which the hook leaves to PBS.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(cd "$HERE/.." && pwd)/fixtures/pbs
KIT=$(cd "$HERE/../../.." && pwd)/slurm_bridge/kit
mkdir -p "$OUT"
bash "$HERE/start.sh"
qmgr -c "create hook cpsched_hold event=queuejob"
qmgr -c "import hook cpsched_hold application/x-python default $KIT/pbs_queuejob_hold.py"
qmgr -c "create queue maint queue_type=execution,enabled=true,started=false,resources_max.walltime=02:00:00,resources_max.nodect=1"
qmgr -c "create queue route queue_type=route,enabled=true,started=true,route_destinations=workq"
sub() { su - pbstest -c "/opt/pbs/bin/qsub -o /dev/null -e /dev/null $*"; }
ok=$(sub -N ok -l select=1:ncpus=1 -l walltime=00:01:00 -- /bin/sleep 1)
bad=$(sub -N bad -l select=1:ncpus=1 -l walltime=00:01:00 -- /bin/sh -c "'exit 3'")
late=$(sub -N late -l select=1:ncpus=1 -l walltime=00:00:02 -- /bin/sleep 60)
qrun -H "(cn01:ncpus=1)" "$ok"
qrun -H "(cn01:ncpus=1)" "$bad"
qrun -H "(cn02:ncpus=1)" "$late"
gone=$(sub -N gone -l select=1:ncpus=1 -- /bin/sleep 1)
qdel "$gone"
run=$(sub -N train_resnet -l select=2:ncpus=2:mem=1gb -l walltime=01:00:00 -- /bin/sleep 600)
qrun -H "(cn01:ncpus=2:mem=1024mb)+(cn02:ncpus=2:mem=1024mb)" "$run"
gpu=$(sub -N gpu -q gpuq -l select=1:ncpus=6:ngpus=1 -l walltime=00:20:00 -- /bin/sleep 600)
qrun -H "(gn01[0]:ncpus=4:ngpus=1+gn01[1]:ncpus=2)" "$gpu"  # one chunk on both vnodes
sub -N plain -l select=1:ncpus=1 -- /bin/sleep 1 >/dev/null
sub -N inq -q workq -l select=3:ncpus=2:mem=2gb -l walltime=00:30:00 -- /bin/sleep 1 >/dev/null
sub -N scatter -l select=2:ncpus=4 -l place=scatter:excl -- /bin/sleep 1 >/dev/null
sub -N pack -l select=2:ncpus=1 -l place=pack -- /bin/sleep 1 >/dev/null
sub -N mine -h -l select=1:ncpus=1 -- /bin/sleep 1 >/dev/null
sub -N after -W depend=afterok:"$run" -l select=1:ncpus=1 -- /bin/sleep 1 >/dev/null
sub -N afterok_met -W depend=afterok:"$ok" -l select=1:ncpus=1 -- /bin/sleep 1 >/dev/null
sub -N sweep -J 1-3 -l select=1:ncpus=1 -- /bin/sleep 1 >/dev/null
sub -N stopped -q maint -l select=1:ncpus=1 -- /bin/sleep 1 >/dev/null
sub -N routed -q route -l select=1:ncpus=1 -- /bin/sleep 1 >/dev/null
sub -N scatter_gpu -q gpuq -l select=2:ncpus=1 -l place=scatter -- /bin/sleep 1 >/dev/null
sub -N vscatter_gpu -q gpuq -l select=2:ncpus=1 -l place=vscatter -- /bin/sleep 1 >/dev/null
resv=$(su - pbstest -c "/opt/pbs/bin/pbs_rsub -R $(date -d '+2 hours' +%H%M) -D 01:00:00 -l select=1:ncpus=2")
resv=${resv%% *}  # "R18.pbshead UNCONFIRMED"
for _ in $(seq 1 20); do pbs_rstat -f "$resv" | grep -q RESV_CONFIRMED && break; sleep 0.5; done
sub -N in_resv -q "${resv%%.*}" -l select=1:ncpus=1 -- /bin/sleep 1 >/dev/null
qmgr -c "set node cn04 state=offline"
sleep 8  # ok and bad end, late is killed at its 2 s walltime
qstat -t -x -f -F json >"$OUT/qstat_txf.json"
pbsnodes -av -F json >"$OUT/pbsnodes_av.json"
qstat -Q -f -F json >"$OUT/qstat_Qf.json"
qstat -B -f -F json >"$OUT/qstat_Bf.json"
pbs_rstat -f >"$OUT/pbs_rstat_f.txt"
qmgr -c "set server job_history_enable=False"
qstat -B -f -F json >"$OUT/qstat_Bf.no_history.json"
echo "recorded into $OUT: $(ls "$OUT" | tr '\n' ' ')"
