#!/usr/bin/env bash
# The installed package, used as a new user would: every `tfa-sim` subcommand once on a small case, then the Python
# API (api.py), in a new empty directory and with the tfa-sim and python found on PATH. .ci/run runs it in a fresh
# venv holding the built wheel and in another holding the sdist, each with every extra (`[all]`; core.sh checks the
# wheel's core alone first). One `smoke` line per subcommand (common.sh):
#     smoke NAME FILE COMMAND…   (COMMAND exits 0 and leaves FILE)
# tests/test_packaging.py fails when a subcommand of `tfa-sim` has no line here.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/common.sh"

smoke run          r/dumps/manifest.json  tfa-sim run --case "$CASE" --intermediate-check --out r
smoke check        r/check.json           tfa-sim check r
smoke timeline     timeline.html          tfa-sim timeline r -o timeline.html
smoke trace        trace.pftrace          tfa-sim trace r --out trace.pftrace
smoke plan         plan.png               tfa-sim plan r -o plan.png
smoke roofline     roofline.png           tfa-sim roofline r -o roofline.png
smoke listing      listing.log            tfa-sim listing compute_p --case "$CASE"
grep -qF "compute_p: listing 'manual' (configs/listings/compute_p/manual.lst)" listing.log \
    || { echo "smoke listing FAILED: no listing priced"; cat listing.log; exit 1; }
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
