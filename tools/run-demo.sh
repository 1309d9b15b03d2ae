#!/bin/sh
# tools/run-demo.sh BUILD_DIR: what `make run` shows: the quickstart cluster up, a device borrowed and used, down.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
cd "$root"
ntbfab="$build/tools/ntbfab"
cfg=config/examples/quickstart.yaml
dir=$(mktemp -d /dev/shm/ntbfab-run-XXXXXX)
export NTBFAB_DAEMON="$build/daemon/ntbfabd" NTBFAB_SIMD="$build/ntbfab-simd" NTBFAB_DIR="$dir"
step() { printf '\n\033[1m$ ntbfab %s\033[0m\n' "$*"; "$ntbfab" "$@"; }
cleanup() { "$ntbfab" down >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
echo "ntbfab quickstart: the cluster of $cfg, in $dir"
step validate "$cfg"
step path "$cfg" borrower lender.acc0
step up "$cfg"
step devices
step borrow lender.acc0 --node borrower --dma-window 64MiB
step lspci --node borrower
printf '\n\033[1m$ ntbfab-demo --fdid 0x4001\033[0m\n'
"$build/tools/ntbfab-demo" --dir "$dir" --fdid 0x4001 --borrower borrower
step devices
step status
step down
trap - EXIT INT TERM
rm -rf "$dir"
