#!/usr/bin/env bash
# The core install as `pip install tfa-sim` gives it, no extra (docs/dependencies.md): none of the extras' modules
# is installed; the core commands run from an empty directory (the plots a sweep or a tune would draw are skipped
# with the line naming tfa-sim[plots]); every command and API function that needs an extra exits 2 with the one
# line naming it and writes nothing. .ci/run runs it in the wheel's fresh venv before the extras go in.
#     refused EXTRA FILE COMMAND…   (COMMAND exits 2, prints one line naming tfa-sim[EXTRA], leaves no FILE)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/common.sh"

refused() {
    local extra=$1 file=$2 code=0
    shift 2
    "$@" >refused.out 2>refused.err || code=$?
    if [ "$code" != 2 ] || [ -s refused.out ] || [ "$(wc -l <refused.err)" != 1 ] || [ -e "$file" ] \
            || ! grep -qF "pip install \"tfa-sim[$extra]\"" refused.err; then
        echo "smoke refused $extra FAILED: exit code $code from: $*"; cat refused.out refused.err; exit 1
    fi
    echo "smoke refused $extra: $(cat refused.err)"
}

python -c 'import importlib.util as u; from tfa_sim.spec.extras import EXTRA_OF as x
found = [m for m in x if u.find_spec(m)]; assert not found, f"the core install holds {found}"'

smoke readme-run   runs                   tfa-sim run
smoke run          r/dumps/manifest.json  tfa-sim run --case "$CASE" --intermediate-check --out r
smoke check        r/check.json           tfa-sim check r
smoke timeline     timeline.svg           tfa-sim timeline r -o timeline.svg
smoke trace        trace.json             tfa-sim trace r --out trace.json
smoke plan         plan.svg               tfa-sim plan r -o plan.svg
smoke roofline     r/roofline.svg         tfa-sim roofline r
smoke listing      listing.log            tfa-sim listing compute_p --case "$CASE"
grep -qF "compute_p: listing 'manual' (configs/listings/compute_p/manual.lst)" listing.log \
    || { echo "smoke listing FAILED: no listing priced"; cat listing.log; exit 1; }
smoke gen-data     g/o.bin                tfa-sim gen-data "$CASE" --out g
smoke sweep        s/results.csv          tfa-sim sweep "$HERE/sweep.toml" --out s --jobs 2 --no-progress
smoke sweep-report s/report.json          tfa-sim sweep-report s
smoke calibrate    c/910b2.toml           tfa-sim calibrate --points "$HERE/points.csv" --out c
smoke tune         u/best.toml            tfa-sim tune --case "$CASE" --out u --no-progress
grep -qF 'plot skipped: plot_preload.png needs matplotlib, which is not installed: pip install "tfa-sim[plots]"' \
    sweep.log || { echo "smoke sweep FAILED: no line on the plots it skipped"; cat sweep.log; exit 1; }

refused plots    timeline.png   tfa-sim timeline r -o timeline.png
refused html     timeline.html  tfa-sim timeline r -o timeline.html
refused plots    roofline.png   tfa-sim roofline r -o roofline.png
refused perfetto trace.pftrace  tfa-sim trace r --out trace.pftrace
refused parquet  trace.parquet  tfa-sim trace r --out trace.parquet
refused plots    p              tfa-sim profile "$HERE/../data/msprof/a2_op_single" --set case.s0=512 --out p
refused dask     d              tfa-sim sweep "$HERE/sweep.toml" --executor dask --out d
refused pandas   a              python -c 'import sys, tfa_sim
try:
    tfa_sim.sweep(sys.argv[1], out="a")
except tfa_sim.InputError as exc:
    sys.exit(print(exc, file=sys.stderr) or 2)' "$HERE/sweep.toml"

cd / && rm -rf "$WORK"
echo "smoke: the core commands ran, the extras' commands were refused, in $SECONDS s"
