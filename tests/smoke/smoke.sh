#!/usr/bin/env bash
# The installed package, used as a new user would: every `tfa-sim` subcommand once on a small case, then the Python
# API (api.py), in a new empty directory and with the tfa-sim and python found on PATH. .ci/run runs it in a fresh
# venv holding the built wheel and in another holding the sdist. One `smoke` line per subcommand:
#     smoke NAME FILE COMMAND…   (COMMAND exits 0 and leaves FILE)
# tests/test_packaging.py fails when a subcommand of `tfa-sim` has no line here.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
CASE=case_float_H_128_S0_128_S1_1024
WORK="$(mktemp -d)"
cd "$WORK"

smoke() {
    local name=$1 file=$2 start=$SECONDS
    shift 2
    "$@" >"$name.log" 2>&1 || { local code=$?; echo "smoke $name FAILED: exit code $code from: $*"; cat "$name.log"
                                 exit 1; }
    [ -e "$file" ] || { echo "smoke $name FAILED: $* exited 0 but wrote no $file"; cat "$name.log"; exit 1; }
    echo "smoke $name: ok, $file ($((SECONDS - start)) s)"
}

where="$(python -c 'import tfa_sim; print(tfa_sim.__file__)')"
case "$where" in "$(cd "$HERE/../.." && pwd)/tfa_sim/"*)
    echo "smoke: tfa_sim is imported from the checkout ($where), not from an installed package"; exit 1;; esac
echo "smoke: tfa_sim from $where, $(tfa-sim --version), in $WORK"

smoke run          r/dumps/manifest.json  tfa-sim run --case "$CASE" --intermediate-check --out r
smoke check        r/check.json           tfa-sim check r
smoke timeline     timeline.html          tfa-sim timeline r -o timeline.html
smoke trace        trace.pftrace          tfa-sim trace r --out trace.pftrace
smoke plan         plan.png               tfa-sim plan r -o plan.png
smoke gen-data     g/o.bin                tfa-sim gen-data "$CASE" --out g
smoke sweep        s/results.csv          tfa-sim sweep "$HERE/sweep.toml" --out s --jobs 2 --no-progress --no-plots
smoke sweep-report s/plot_preload.png     tfa-sim sweep-report s
smoke calibrate    c/910b2.toml           tfa-sim calibrate --points "$HERE/points.csv" --out c
smoke tune         u/best.toml            tfa-sim tune --case "$CASE" --out u --no-progress
smoke profile      p/profile.json         tfa-sim profile "$HERE/../data/msprof/a2_op_single" --set case.s0=512 \
                                          --set case.s1=2048 --set schedule.cv_fifo_cons_sync_period=1 --out p
smoke api          api.json               python "$HERE/api.py" api.json

cd / && rm -rf "$WORK"
echo "smoke: every subcommand and the API ran, in $SECONDS s"
