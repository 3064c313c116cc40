# What smoke.sh and core.sh share (sourced, with HERE set to tests/smoke): a new empty directory to work in, the
# check that tfa_sim is the installed package rather than the checkout, and the `smoke` line:
#     smoke NAME FILE COMMAND…   (COMMAND exits 0 and leaves FILE)
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
