#!/bin/sh
# tests/integration/cli_ops.sh BUILD SRC: the operator's everyday verbs on a real cluster of
# the built programs (ports 18110, tests/README.md): topology as a picture; up that checks
# every process it started and stops them when it fails; progress on a terminal only;
# devices filters, device show, rpc and rpc.list; down that stops every process of the
# cluster, a program attached to its fabric included.
set -u
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
ntbfab=${NTBFAB:-$build/tools/ntbfab}
top=$(mktemp -d /dev/shm/ntbfab-ops-XXXXXX)
dir=$top/inst
bg=""
cleanup() {
	for p in $bg; do kill -9 "$p" 2>/dev/null; done
	"$ntbfab" down --dir "$dir" >/dev/null 2>&1
	[ -n "${NTBFAB_KEEP:-}" ] || rm -rf "$top"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
sed 's/:7700/:18110/' "$src/config/examples/quickstart.yaml" >"$top/c.yaml"
cfg=$top/c.yaml

echo "topology --dot: every cable, the path drawn bold, budgets on the adapters"
"$ntbfab" topology --dot --budgets --path borrower,lender.acc0 "$cfg" >"$top/g.dot" ||
	fail "topology --dot"
grep -q '^  a0 -- a1 \[taillabel="0", headlabel="0", color="#c0392b", penwidth=3\];$' \
	"$top/g.dot" || fail "the cable on the path is not drawn bold: $(cat "$top/g.dot")"
grep -q 'rid 2/32' "$top/g.dot" || fail "no requester-ID budget on the adapters"
[ "$(grep -c ' -- a[0-9]* \[taillabel' "$top/g.dot")" = 1 ] || fail "not exactly one cable"
"$ntbfab" topology --budgets "$cfg" >/dev/null 2>"$top/err" &&
	fail "--budgets without a picture was accepted"
grep -q "add --dot or --svg FILE" "$top/err" || fail "--budgets alone: $(cat "$top/err")"
"$ntbfab" topology --dot --path borrower,lender.gpu9 "$cfg" >/dev/null 2>"$top/err" &&
	fail "a path to no device was drawn"
grep -q "lender.gpu9" "$top/err" || fail "bad --path: $(cat "$top/err")"
if command -v dot >/dev/null; then
	"$ntbfab" topology --svg "$top/g.svg" "$cfg" || fail "topology --svg"
	grep -q '<svg' "$top/g.svg" || fail "no SVG written"
	grep -q 'borrower (id 8)' "$top/g.svg" || fail "the SVG does not name the borrower"
fi

echo "up fails when a daemon stops: what it started is stopped again, and it says so"
cat >"$top/daemon" <<EOF
#!/bin/sh
case " \$* " in *" --node borrower "*) echo "ntbfabd: borrower refuses to start (test)" >&2; exit 1;; esac
exec "$build/daemon/ntbfabd" "\$@"
EOF
chmod +x "$top/daemon"
NTBFAB_DAEMON=$top/daemon "$ntbfab" up "$cfg" --dir "$dir" >"$top/out" 2>"$top/err" &&
	fail "up succeeded with a daemon that stops"
grep -q "the daemon of node 'borrower' stopped: ntbfabd: borrower refuses to start (test)" \
	"$top/err" || fail "up's error: $(cat "$top/err")"
grep -q "stopped the 2 processes this 'up' started" "$top/err" ||
	fail "up did not stop what it started: $(cat "$top/err")"
for p in lender simd; do
	pid=$(cat "$dir/run/$p.pid" 2>/dev/null)
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && fail "$p (pid $pid) still runs after a failed up"
done

echo "up on a terminal shows its progress; with --json or a pipe it does not"
"$ntbfab" up "$cfg" --dir "$dir" --json >"$top/up.json" || fail "up --json: $(cat "$top/up.json")"
grep -q "daemons ready" "$top/up.json" && fail "progress in up's JSON"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$top/up.json" || fail "up's JSON"
if command -v script >/dev/null; then
	script -qec "$ntbfab up $cfg --dir $dir" /dev/null >"$top/tty" 2>&1 || fail "up on a tty"
	# Already up: nothing to wait for, so no progress; a fresh up below is the real check.
	"$ntbfab" down --dir "$dir" >/dev/null || fail "down"
	script -qec "$ntbfab up $cfg --dir $dir" /dev/null >"$top/tty" 2>&1 || fail "up on a tty"
	grep -q "starting cluster 'quickstart': [0-9] of 2 daemons ready" "$top/tty" ||
		fail "no progress on a terminal: $(cat "$top/tty")"
	grep -q "cluster 'quickstart' is up" "$top/tty" || fail "up on a tty: $(cat "$top/tty")"
fi

echo "devices filters, device show, rpc"
export NTBFAB_DIR=$dir
"$ntbfab" devices --class 0x01 --json | grep -q '"name": "nvme0"' || fail "--class 0x01"
"$ntbfab" devices --class 0x01 --json | grep -q '"acc0"' && fail "--class 0x01 kept acc0"
"$ntbfab" devices --node borrower | grep -q "no device matches" || fail "--node borrower"
"$ntbfab" devices --state sold >/dev/null 2>&1
[ $? = 2 ] || fail "--state sold is no usage error"
"$ntbfab" borrow lender.acc0 --node borrower >/dev/null || fail "borrow"
"$ntbfab" devices --state borrowed | grep -q "acc0.*exclusive.*borrower" || fail "--state borrowed"
"$ntbfab" devices --state available --json | grep -q '"acc0"' && fail "acc0 listed as available"
"$ntbfab" device show lender.acc0 >"$top/show" || fail "device show"
grep -q "borrowed by  borrower (exclusive, DMA window 16 MiB" "$top/show" ||
	fail "device show: $(cat "$top/show")"
grep -q "BAR2         256 MiB" "$top/show" || fail "device show BARs: $(cat "$top/show")"
"$ntbfab" rpc rpc.list --json | grep -q '"name":"device.borrow","params":\[{"name":"fdid","type":"integer","required":true' ||
	fail "rpc.list does not describe device.borrow: $("$ntbfab" rpc rpc.list --json | head -c 400)"
"$ntbfab" rpc --node borrower device.borrows --json | grep -q '"lender":"lender"' ||
	fail "rpc device.borrows"
"$ntbfab" rpc device.borrow '{"fdid": "x"}' 2>"$top/err"
[ $? = 1 ] && grep -q "parameter 'fdid' must be a non-negative integer" "$top/err" ||
	fail "a bad parameter: $(cat "$top/err")"
"$ntbfab" rpc device.borrow '{"fdid":' 2>"$top/err"
[ $? = 2 ] || fail "unparsable params are no usage error: $(cat "$top/err")"
"$ntbfab" return lender.acc0 --node borrower >/dev/null || fail "return"

echo "ntbfab-nvme: the manager's reset and a write show progress on a terminal only"
nvme=$build/apps/nvme/ntbfab-nvme
if command -v script >/dev/null && [ -x "$nvme" ]; then
	script -qec "env NTBFAB_DIR=$dir NTBFAB_NODE=lender $nvme manager --fdid 0x4000" /dev/null \
		>"$top/mgr.tty" 2>&1 &
	bg="$bg $!"
	n=0
	while ! grep -q "manager ready" "$top/mgr.tty" && [ $n -lt 200 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	grep -q "resetting lender.nvme0: waiting for the controller to be ready" "$top/mgr.tty" ||
		fail "the manager's reset showed no progress: $(cat "$top/mgr.tty")"
	script -qec "env NTBFAB_NODE=borrower $nvme write --fdid 0x4000 --lba 0 --blocks 256" \
		/dev/null >"$top/w.tty" 2>&1 || fail "ntbfab-nvme write: $(cat "$top/w.tty")"
	grep -q "write: [0-9]* of 32 commands" "$top/w.tty" ||
		fail "a write showed no progress: $(cat "$top/w.tty")"
	NTBFAB_NODE=borrower "$nvme" verify --fdid 0x4000 --lba 0 --blocks 256 >"$top/v.out" 2>&1 ||
		fail "ntbfab-nvme verify: $(cat "$top/v.out")"
	grep -q "commands" "$top/v.out" && grep -q "$(printf '\r')" "$top/v.out" &&
		fail "progress through a pipe: $(cat "$top/v.out")"
fi

echo "down stops every process of the cluster, a program attached to its fabric included"
NTBFAB_NODE=lender "$build/frontends/sisci-compat/sisci-pingpong" -rn 8 -server -loops 1000 \
	>"$top/pp.out" 2>&1 &
pp=$!
bg="$bg $pp"
n=0
while ! grep -q "$dir/" "/proc/$pp/maps" 2>/dev/null && [ $n -lt 100 ]; do
	sleep 0.1
	n=$((n + 1))
done
grep -q "$dir/" "/proc/$pp/maps" || fail "the SISCI server never attached: $(cat "$top/pp.out")"
"$ntbfab" down --dir "$dir" --json >"$top/down.json" || fail "down: $(cat "$top/down.json")"
grep -q "\"pid\": $pp" "$top/down.json" || fail "down did not stop pid $pp: $(cat "$top/down.json")"
kill -0 "$pp" 2>/dev/null && fail "the attached program still runs after down"
echo "1 passed, 0 failed"
