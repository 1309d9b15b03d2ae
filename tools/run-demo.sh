#!/bin/sh
# tools/run-demo.sh BUILD_DIR: what `make run` shows (the quickstart cluster, before anything runs).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
cd "$root"
ntbfab="$build/tools/ntbfab"
cfg=config/examples/quickstart.yaml
step() { printf '\n\033[1m$ ntbfab %s\033[0m\n' "$*"; "$ntbfab" "$@"; }
echo "ntbfab quickstart: the cluster of $cfg"
step validate "$cfg"
step topology "$cfg"
step path "$cfg" borrower lender.nvme0
step plan "$cfg" --borrow lender:nvme0 --by borrower
step plan "$cfg" --borrow lender:nvme0 --by borrower --count 40 || true
step budget "$cfg"
