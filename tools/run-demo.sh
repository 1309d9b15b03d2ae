#!/bin/sh
# tools/run-demo.sh BUILD_DIR: what `make run` shows (the quickstart cluster, before anything runs).
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
ntbfab="$build/tools/ntbfab"
cfg="$here/config/examples/quickstart.yaml"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
echo "ntbfab quickstart: the cluster of config/examples/quickstart.yaml"
step "$ntbfab" validate "$cfg"
step "$ntbfab" topology "$cfg"
step "$ntbfab" path "$cfg" borrower lender.nvme0
step "$ntbfab" plan "$cfg" --borrow lender:nvme0 --by borrower
step "$ntbfab" budget "$cfg"
