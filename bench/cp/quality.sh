#!/bin/sh
# Quality table of docs/results/cp-dispatchers.md: EASY, HCP3, PCP3 and PCP'20 on a trace, same
# predictor (last-two) and allocator (best-fit) for all, CP deadline 0.2 s.
#   sh bench/cp/quality.sh TRACE JOBS OUT [--system systems/curie.toml]
# JOBS: the first N jobs, or "all" for the whole trace. Runs one replay after the other
# (one core); each writes OUT/<dispatcher>/summary.json and its wall time to OUT/wall.txt.
# DISPATCHERS="easy hcp3" picks (and orders) the dispatchers; CP_LIMIT (first restart's
# limit, default 0.05 s) and CP_PATIENCE (restarts without improvement, default 2) tune
# the search; NICE (default 19) the replays' priority.
set -eu
trace=$1; jobs=$2; out=$3; shift 3
cd "$(dirname "$0")/../.."
if [ "$jobs" = all ]; then prefix=""; else prefix="--jobs $jobs"; fi
for d in ${DISPATCHERS:-easy hcp3 pcp3 pcp20}; do
    start=$(date +%s)
    # shellcheck disable=SC2086  # $prefix is empty or two words
    nice -n "${NICE:-19}" .venv/bin/cpsched replay "$trace" --out "$out/$d" --dispatcher "$d" \
        --allocator best-fit --predictor last-two --wait-bound 0 --wait-bound-depth 0 $prefix \
        --cp-deadline 0.2 --cp-limit "${CP_LIMIT:-0.05}" --cp-patience "${CP_PATIENCE:-2}" \
        --no-plots "$@"
    echo "$d $(( $(date +%s) - start )) s" >> "$out/wall.txt"
done
