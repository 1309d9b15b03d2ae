#!/bin/sh
# tests/fuzz/run.sh BUILD_DIR SECONDS: run every fuzz target, the time split evenly between them.
# Targets: fuzz_config (the YAML loader), fuzz_rpc (the daemon's JSON-RPC server), fuzz_peer
# (the peer protocol's frames). Exits non-zero on any crash, leak, timeout or out-of-memory;
# prints a one-line summary per target. Inputs that failed are kept in BUILD_DIR/fuzz-artifacts.
set -eu
usage="usage: run.sh BUILD_DIR SECONDS"
build=${1:?$usage}
secs=${2:?$usage}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
targets="fuzz_config fuzz_rpc fuzz_peer"
n=$(echo $targets | wc -w)
each=$(( secs / n ))
[ "$each" -ge 1 ] || each=1
status=0
for t in $targets; do
        bin=$build/tests/fuzz/$t
        if [ ! -x "$bin" ]; then
                echo "fuzz: $bin not found; configure $build with CC=clang -Dfuzz=true" >&2
                exit 2
        fi
        work=$(mktemp -d)
        mkdir "$work/corpus" "$work/artifacts"
        case $t in
        fuzz_config)
                cp "$root"/config/examples/*.yaml "$root"/tests/config-invalid/*.yaml \
                        "$here"/corpus_config/* "$work/corpus/"
                extra="-dict=$here/config.dict -max_len=16384" ;;
        fuzz_rpc)
                cp "$here"/corpus_rpc/* "$work/corpus/"
                extra="-dict=$here/rpc.dict -max_len=65536" ;;
        fuzz_peer)
                cp "$here"/corpus_peer/* "$work/corpus/"
                extra="-max_len=8192" ;;
        esac
        rc=0
        "$bin" -max_total_time="$each" -rss_limit_mb=2048 -timeout=10 $extra \
                -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
                "$work/corpus" >"$work/log" 2>&1 || rc=$?
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
        cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -n 1 | cut -d' ' -f2)
        found=$(find "$work/artifacts" -type f | wc -l)
        if [ "$found" -gt 0 ]; then
                mkdir -p "$build/fuzz-artifacts"
                cp "$work"/artifacts/* "$build/fuzz-artifacts/"
        fi
        if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
                tail -n 40 "$work/log" >&2
                echo "$t: FAILED after ${runs:-?} runs in ${each}s (exit $rc, $found inputs in $build/fuzz-artifacts)"
                status=1
        else
                echo "$t: ok, ${runs:-?} runs in ${each}s, coverage ${cov:-?} edges, no crash, leak or timeout"
        fi
        rm -rf "$work"
done
exit $status
