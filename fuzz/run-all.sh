#!/usr/bin/env bash
# Runs every fuzz target for SECONDS and prints, per target, the executions,
# the corpus size and the findings (crash, timeout, out-of-memory and leak
# reproducers libFuzzer writes to fuzz/artifacts/<target>/).
#
# Usage: fuzz/run-all.sh SECONDS [TARGET...]
#   JOBS=2 fuzz/run-all.sh 600     two targets at a time (default 1)
#   NO_BUILD=1 ...                 use the binaries already built
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly compiler, or a
# stable one with RUSTC_BOOTSTRAP=1 (set here). Builds every target once
# (`cargo fuzz build`), then runs the binaries directly, so a source change
# during a long run does not trigger a rebuild per target. Logs go to
# fuzz/logs/. Exits non-zero when any target found something.
set -u
secs=${1:?usage: run-all.sh SECONDS [TARGET...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
jobs=${JOBS:-1}
export RUSTC_BOOTSTRAP=1
cd "$repo" || exit 2
if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi
[ -d "$here/corpus" ] || "$here/seed-corpus.sh" || exit 2
if [ -z "${NO_BUILD:-}" ]; then
    cargo fuzz build || exit 2
fi
triple=$(rustc -vV | sed -n 's/^host: //p')
bin_dir=${CARGO_TARGET_DIR:-$here/target}/$triple/release
mkdir -p "$here/logs"

# Crashes, timeouts, out-of-memory and leaks; libFuzzer's slow-unit
# reports are not findings.
findings() {
    find "$here/artifacts/$1" -type f \( -name 'crash-*' -o -name 'timeout-*' \
        -o -name 'oom-*' -o -name 'leak-*' \) 2>/dev/null | wc -l
}

run_one() {
    local t=$1 log="$here/logs/$1.log"
    local before start
    before=$(findings "$t")
    start=$(date +%s)
    mkdir -p "$here/corpus/$t" "$here/artifacts/$t"
    # -rss_limit_mb / -malloc_limit_mb: an input that makes a device hold
    # or ask for more than this is a finding (unbounded allocation).
    "$bin_dir/$t" "$here/corpus/$t" -artifact_prefix="$here/artifacts/$t/" \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -print_final_stats=1 >"$log" 2>&1
    local execs corpus after took
    took=$(($(date +%s) - start))
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    corpus=$(find "$here/corpus/$t" -type f | wc -l)
    after=$(findings "$t")
    printf '%-18s %6ss %12s execs %7s corpus files %3s findings\n' \
        "$t" "$took" "${execs:-?}" "$corpus" "$((after - before))"
}

running=0
for t in "${targets[@]}"; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait
total=0
for t in "${targets[@]}"; do total=$((total + $(findings "$t"))); done
[ "$total" -eq 0 ]
