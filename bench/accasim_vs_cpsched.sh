#!/usr/bin/env bash
# Wall time and peak RSS of one EASY + first-fit replay in AccaSim 1.1.3 (the papers'
# simulator) and in cpsched, one after the other on the same machine.
#
#   bench/accasim_vs_cpsched.sh [TRACE]     (default: HPC2N-2002-2.2-cln.swf.gz)
#
# AccaSim lives in a throwaway venv, ${TMPDIR:-/tmp}/accasim-venv, so that neither its
# dependencies nor its Python-3.10+ shim (see accasim_replay.py) touch cpsched's .venv.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
trace=${1:-${CPSCHED_TRACES:-$repo/../shared/data/traces}/HPC2N-2002-2.2-cln.swf.gz}
venv=${TMPDIR:-/tmp}/accasim-venv
python311=${PYTHON311:-python3.11}
cpsched=$repo/.venv/bin/cpsched

die() { echo "accasim_vs_cpsched: $*" >&2; exit 1; }
[[ -f $trace ]] || die "no trace at $trace"
[[ -x $cpsched ]] || die "no $cpsched: run ./dev setup first"
[[ -x /usr/bin/time ]] || die "GNU time is missing (apt-get install time)"

# Reuse the venv only if AccaSim 1.1.3 imports from it: a half-made one is rebuilt.
accasim_ok() {
    "$venv/bin/python" - 2>/dev/null <<'EOF'
import collections, collections.abc, importlib.metadata as md
collections.Mapping = collections.abc.Mapping
import accasim.base.simulator_class
assert md.version("accasim") == "1.1.3"
EOF
}
if ! accasim_ok; then
    echo "setting up $venv (AccaSim 1.1.3) ..." >&2
    rm -rf "$venv"
    "$python311" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null \
        || die "cannot install AccaSim: '$python311' is not Python 3.11 (set PYTHON311)"
    "$python311" -m venv "$venv" || die "cannot install AccaSim: venv creation failed"
    # No old versions are needed to import 1.1.3 on 3.11 (the one break is in the stdlib,
    # shimmed in accasim_replay.py); sortedcontainers<3 keeps SortedListWithKey, which
    # AccaSim's schedulers use.
    "$venv/bin/pip" install -q "accasim==1.1.3" "sortedcontainers<3" >&2 \
        || die "cannot install AccaSim: pip install accasim==1.1.3 failed (see above)"
    accasim_ok || die "cannot install AccaSim: installed, but it does not import on 3.11"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/accasim-vs-cpsched.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Each tool runs alone, under GNU time, so its own peak RSS is what -v reports.
echo "AccaSim replay of $(basename "$trace") ..." >&2
/usr/bin/time -v -o "$work/accasim.time" "$venv/bin/python" "$here/accasim_replay.py" \
    "$trace" >"$work/accasim.json" 2>"$work/accasim.log" \
    || { cat "$work/accasim.log" >&2; die "AccaSim replay failed"; }
echo "cpsched replay ..." >&2
/usr/bin/time -v -o "$work/cpsched.time" "$cpsched" replay "$trace" --dispatcher easy \
    --allocator first-fit --predictor wall-time --wait-bound 0 --wait-bound-depth 0 --out "$work/cpsched" >"$work/cpsched.log" 2>&1 \
    || { cat "$work/cpsched.log" >&2; die "cpsched replay failed"; }

# Any Python reads the results; the venv's is the one sure to be here.
"$venv/bin/python" - "$work" <<'EOF'
import csv, json, re, sys
from pathlib import Path

work = Path(sys.argv[1])

def measured(tool):
    text = (work / f"{tool}.time").read_text()
    clock = re.search(r"Elapsed \(wall clock\).*: (\S+)", text).group(1)
    secs = sum(float(p) * 60**i for i, p in enumerate(reversed(clock.split(":"))))
    kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    return secs, kb / 1024

acc = json.loads((work / "accasim.json").read_text())
cps = json.loads((work / "cpsched" / "summary.json").read_text())
with (work / "cpsched" / "jobs.csv").open() as f:
    waits = [int(r["wait"]) for r in csv.DictReader(f)]
rows = {
    "AccaSim 1.1.3": (*measured("accasim"), acc["jobs"]),
    "cpsched": (*measured("cpsched"), cps["jobs_total"]),
}
print(f"{'tool':<14} {'wall s':>8} {'peak RSS MB':>12} {'jobs':>8}")
for tool, (secs, mb, jobs) in rows.items():
    print(f"{tool:<14} {secs:>8.1f} {mb:>12.1f} {jobs:>8}")
(at, am, _), (ct, cm, _) = rows.values()
print(f"{'cpsched/AccaSim':<14} {ct / at:>8.2f} {cm / am:>12.2f}")
print()
print(f"AccaSim's own simulation loop: {acc['simulate_s']:.1f} s")
print(f"{'mean wait s':<14} {'all jobs':>10} {'w/o first 1%':>13}")
print(f"{'AccaSim':<14} {acc['mean_wait_s_all']:>10.0f} {acc['mean_wait_s_excl_warmup']:>13.0f}")
print(f"{'cpsched':<14} {sum(waits) / len(waits):>10.0f} {cps['mean_wait_s']:>13.0f}")
EOF
