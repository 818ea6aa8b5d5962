#!/bin/sh
# Quality table of docs/cp-dispatchers.md: EASY, HCP3, PCP3 and PCP'20 on a prefix of a
# trace, same predictor (last-two) and allocator (best-fit) for all, CP deadline 0.2 s.
#   sh bench/cp/quality.sh TRACE JOBS OUT [--system systems/curie.toml]
# Runs one replay after the other (one core); each writes OUT/<dispatcher>/summary.json.
# DISPATCHERS="easy hcp3" picks (and orders) the dispatchers.
set -eu
trace=$1; jobs=$2; out=$3; shift 3
cd "$(dirname "$0")/../.."
for d in ${DISPATCHERS:-easy hcp3 pcp3 pcp20}; do
    start=$(date +%s)
    nice -n 19 .venv/bin/cpsched replay "$trace" --out "$out/$d" --dispatcher "$d" \
        --allocator best-fit --predictor last-two --jobs "$jobs" \
        --cp-deadline 0.2 --cp-limit 0.05 --no-plots "$@"
    echo "$d $(( $(date +%s) - start )) s" >> "$out/wall.txt"
done
