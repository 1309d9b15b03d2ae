#!/bin/sh
# tests/fuzz/run.sh BUILD_DIR SECONDS: fuzz the config loader from the examples and the invalid corpus.
# Exits non-zero on any crash, leak, timeout or out-of-memory; prints a one-line summary.
# Inputs that failed are kept in BUILD_DIR/fuzz-artifacts (the work directory is temporary).
set -eu
usage="usage: run.sh BUILD_DIR SECONDS"
build=${1:?$usage}
secs=${2:?$usage}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$build/tests/fuzz/fuzz_config
if [ ! -x "$bin" ]; then
        echo "fuzz: $bin not found; configure $build with CC=clang -Dfuzz=true" >&2
        exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/corpus" "$work/artifacts"
cp "$root"/config/examples/*.yaml "$root"/tests/config-invalid/*.yaml "$here"/seeds/* "$work/corpus/"
status=0
"$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=16384 \
        -dict="$here/config.dict" -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
        "$work/corpus" >"$work/log" 2>&1 || status=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -n 1 | cut -d' ' -f2)
found=$(find "$work/artifacts" -type f | wc -l)
if [ "$found" -gt 0 ]; then
        mkdir -p "$build/fuzz-artifacts"
        cp "$work"/artifacts/* "$build/fuzz-artifacts/"
fi
if [ "$status" -ne 0 ] || [ "$found" -gt 0 ]; then
        tail -n 40 "$work/log" >&2
        echo "fuzz_config: FAILED after ${runs:-?} runs in ${secs}s (exit $status, $found inputs in $build/fuzz-artifacts)"
        exit 1
fi
echo "fuzz_config: ok, ${runs:-?} runs in ${secs}s, coverage ${cov:-?} edges, no crash, leak or timeout"
