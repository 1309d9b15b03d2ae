#!/bin/busybox sh
# tests/kernel/init.sh: /init of the kernel tier's guests (docs/linux-ntb.md). Both guests run
# the same steps in the same order (kt.steps on the kernel command line), meeting at barriers
# on their management network; each step loads an NTB client, checks what it does between the
# guests, and unloads it (an NTB device has one client at a time). Results go to the console as
# RESULT name ok|FAIL detail and FIGURE name value unit lines.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
read up idle </proc/uptime
ROLE=$(sed -n 's/.*kt\.role=\([a-z]*\).*/\1/p' /proc/cmdline)
STEPS=$(sed -n 's/.*kt\.steps=\([a-z0-9_,]*\).*/\1/p' /proc/cmdline | tr , ' ')
# kerneltier.py --env NAME=VALUE: variables for the steps (PP_DELAY_MS, PERF_TOTAL_ORDER, ...)
for kv in $(sed -n 's/.*kt\.env=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' '); do
        export "$kv"
done
if [ "$ROLE" = probe ]; then
        # the accelerator probe (guestkit.accelerator): reaching /init is all it asks
        echo "VMTIER PROBE OK"
        poweroff -f
fi
echo "FIGURE boot_to_init_s_$ROLE $up s"

result() { echo "RESULT $1 $2 $3"; }
E=/lib/modules/extra
for m in $(cat /lib/modules/order); do
        insmod /lib/modules/$m.ko || echo "ktier: insmod $m failed"
done
# The management network (a QEMU datagram pair, nothing else on it): barriers, and what
# programs added to the guests need. The NTB's own network (ntb_netdev) is 10.99.2.0/24.
ifconfig lo 127.0.0.1 up
case "$ROLE" in
a) IP=10.99.1.4 PEER=10.99.1.8 NIP=10.99.2.4 NPEER=10.99.2.8 ;;
*) IP=10.99.1.8 PEER=10.99.1.4 NIP=10.99.2.8 NPEER=10.99.2.4 ;;
esac
ifconfig eth0 $IP netmask 255.255.255.0 up || echo "ktier: no eth0"

# Both guests reach NAME before either goes on (ntbfab-ntbtest barrier: TCP on port 18400).
barrier() {
        ntbfab-ntbtest barrier $ROLE $PEER "$1" 120 && return 0
        result barrier-$1 FAIL "the other guest did not reach barrier $1 in 120 s"
        return 1
}

# until SECONDS COMMAND...: retry COMMAND every 0.1 s for at most SECONDS.
until_ok() {
        n=$(($1 * 10))
        shift
        while [ $n -gt 0 ]; do
                "$@" >/dev/null 2>&1 && return 0
                sleep 0.1
                n=$((n - 1))
        done
        return 1
}
is() { [ "$(cat $1 2>/dev/null)" = "$2" ]; }

insmod $E/ntb.ko
hw_load() {
        insmod $E/ntb_hw_ivshmem.ko "$@" || return 1
        BDF=$(basename /sys/bus/ntb/devices/* 2>/dev/null)
        [ -e /sys/kernel/debug/ntb_hw_ivshmem/$BDF/state ]
}
HWSTATE() { cat /sys/kernel/debug/ntb_hw_ivshmem/$BDF/state; }
if hw_load; then
        SIDE=$(HWSTATE | sed -n 's/^side \([01]\).*/\1/p')
        result hw-probe ok "ntb_hw_ivshmem on $BDF, side $SIDE: $(dmesg | grep -m1 'emulated NTB side' | sed 's/^.*emulated/emulated/')"
else
        result hw-probe FAIL "ntb_hw_ivshmem did not register an NTB device: $(dmesg | grep -i ntb | tail -n 5)"
fi

# ---- ntb_tool: scratchpads, doorbells and a memory window, both ways ----
step_tool() {
        insmod $E/ntb_tool.ko || { result tool-link FAIL "insmod ntb_tool failed"; return; }
        T=/sys/kernel/debug/ntb_tool/$BDF
        echo Y >$T/link
        if until_ok 30 is $T/peer0/link Y; then
                result tool-link ok "port $(cat $T/port), peer port $(cat $T/peer0/port), link up"
        else
                result tool-link FAIL "peer0/link is '$(cat $T/peer0/link)' after 30 s"
        fi
        # each side writes its value into the other's scratchpad 0 and finds the peer's in its own
        mine=0xcafe000$((SIDE + 1))
        theirs=0xcafe000$((2 - SIDE))
        echo $mine >$T/peer0/spad0
        if until_ok 20 is $T/spad0 $theirs && is $T/peer0/spad0 $mine; then
                result tool-spad ok "own spad0 = $(cat $T/spad0) (written by the peer), the peer's spad0 reads back $(cat $T/peer0/spad0)"
        else
                result tool-spad FAIL "own spad0 = $(cat $T/spad0), expected $theirs; the peer's reads $(cat $T/peer0/spad0)"
        fi
        # inbound window 0 (4 MiB: the emulated NTB's slice for it), then tell the peer in spad 1
        if echo 4194304 >$T/peer0/mw_trans0; then
                echo 1 >$T/peer0/spad1
        else
                result tool-mw FAIL "mw_trans0: $(dmesg | tail -n 2)"
        fi
        msg="NTBTOOL-FROM-SIDE-$SIDE-$(cat /proc/sys/kernel/random/uuid)"
        if until_ok 20 is $T/spad1 0x1 && echo 0:4194304 >$T/peer0/peer_mw_trans0 &&
                echo -n "$msg" >$T/peer0/peer_mw0; then
                echo "$msg" >/tmp/mw-sent
                echo "s 0x2" >$T/peer_db
        fi
        if until_ok 20 is $T/db 0x2; then
                result tool-db ok "doorbell bit 1 rung by the peer: db = $(cat $T/db)"
        else
                result tool-db FAIL "db = $(cat $T/db) after 20 s, expected 0x2"
        fi
        # the peer's message, in the inbound buffer behind window 0; and ours read back by it
        got=$(head -c 55 $T/peer0/mw0)
        case "$got" in
        NTBTOOL-FROM-SIDE-$((1 - SIDE))-*) result tool-mw ok "the peer wrote '$got' through its window 0; this side wrote '$(cat /tmp/mw-sent)'" ;;
        *) result tool-mw FAIL "inbound window 0 holds '$got'" ;;
        esac
        barrier tool-read
        # ntb_transport reads its scratchpad 1 as the peer's queue-ready bits: leave zeros
        echo 0 >$T/spad0
        echo 0 >$T/spad1
        echo 0 >$T/peer0/mw_trans0
        # Linux 6.1's ntb_tool removes its debugfs directory before the outbound window's file
        # when it is unloaded (a use-after-free): free the window through its file first.
        echo 0:0 >$T/peer0/peer_mw_trans0
        rmmod ntb_tool
}

# ---- ntb_pingpong: doorbell ping-pong, counts advancing on both sides ----
step_pingpong() {
        insmod $E/ntb_pingpong.ko delay_ms=${PP_DELAY_MS:-10} ||
                { result pingpong-count FAIL "insmod ntb_pingpong failed"; return; }
        C=/sys/kernel/debug/ntb_pingpong/$BDF/count
        until_ok 30 test "$(cat $C 2>/dev/null)" -gt 0
        a=$(cat $C)
        read t0 idle </proc/uptime
        sleep ${PP_SECONDS:-3}
        b=$(cat $C)
        read t1 idle </proc/uptime
        if [ "$b" -gt "$a" ]; then
                result pingpong-count ok "count $a -> $b in $(awk "BEGIN {print $t1 - $t0}") s (delay_ms=${PP_DELAY_MS:-10})"
                echo "FIGURE pingpong_per_s_$ROLE $(awk "BEGIN {print ($b - $a) / ($t1 - $t0)}") 1/s"
        else
                result pingpong-count FAIL "count $a -> $b: no pongs; $(dmesg | grep -i pingpong | tail -n 3)"
        fi
        barrier pingpong-done
        rmmod ntb_pingpong
}

# ---- ntb_transport + ntb_netdev: a ping, and 64 MiB over TCP checked byte for byte ----
step_netdev() {
        # Guest b first, guest a once b's has settled. ntb_transport raises a link event when it
        # probes; with the link down it queues a cleanup that cancels its handshake's retry
        # work, and if that cleanup runs late, after the link came up and the first try failed,
        # the handshake is never retried (both sides wait forever, seen under load). Loaded in
        # turn, the second side finds the link up and neither sees it go down again.
        [ $ROLE = a ] && barrier netdev-b-loaded
        insmod $E/ntb_transport.ko && insmod $E/ntb_netdev.ko ||
                { result netdev-carrier FAIL "insmod: $(dmesg | tail -n 3)"; return; }
        [ $ROLE = b ] && sleep 1 && barrier netdev-b-loaded
        NI=""
        for i in /sys/class/net/*; do
                n=$(basename $i)
                [ $n != lo ] && [ $n != eth0 ] && NI=$n
        done
        ifconfig $NI $NIP netmask 255.255.255.0 up
        if until_ok 90 is /sys/class/net/$NI/carrier 1; then
                result netdev-carrier ok "$NI ($NIP) carrier up, mtu $(cat /sys/class/net/$NI/mtu)"
        else
                result netdev-carrier FAIL "$NI carrier '$(cat /sys/class/net/$NI/carrier)' after 90 s; $(HWSTATE | head -n 4 | tr '\n' ' ')"
                dmesg | tail -n 30
        fi
        # at most 30 s, whatever the machine's load: one answer proves the path
        out=$(ping -c 5 -i 0.2 -w 30 $NPEER 2>&1)
        if echo "$out" | grep -q " [1-5] packets received"; then
                result netdev-ping ok "$(echo "$out" | tail -n 2 | tr '\n' ' ')"
        else
                result netdev-ping FAIL "$out"
                cat /sys/kernel/debug/ntb_transport/$BDF/qp0/stats
                HWSTATE
                dmesg | tail -n 20
        fi
        if [ $ROLE = b ]; then
                ntbfab-ntbtest tcp-recv 18401 67108864 7 >/tmp/recv.out 2>&1 &
                RP=$!
        fi
        barrier netdev-tcp
        if [ $ROLE = a ]; then
                ntbfab-ntbtest tcp-send $NPEER 18401 67108864 7
        else
                wait $RP
                cat /tmp/recv.out
        fi
        barrier netdev-done
        ifconfig $NI down
        rmmod ntb_netdev
        rmmod ntb_transport
}

# ---- ntbfab_ntb: its character device between the guests (ntbfab-ntbtest ntbfab) ----
step_ntbfab() {
        insmod $E/ntbfab_ntb.ko || { result ntbfab-version FAIL "insmod ntbfab_ntb failed"; return; }
        until_ok 10 test -c /dev/ntbfab-ntb0
        ntbfab-ntbtest ntbfab $ROLE $PEER /sys/kernel/debug/ntb_hw_ivshmem/$BDF/state
        barrier ntbfab-done
        rmmod ntbfab_ntb
}

# ---- ntb_perf: copies through the window (both ends port 0, see docs/linux-ntb.md) ----
step_perf() {
        rmmod ntb_hw_ivshmem && hw_load same_port=1 ||
                { result perf-run FAIL "reloading ntb_hw_ivshmem same_port=1 failed"; return; }
        insmod $E/ntb_perf.ko chunk_order=${PERF_CHUNK_ORDER:-19} total_order=${PERF_TOTAL_ORDER:-26} ||
                { result perf-run FAIL "insmod ntb_perf failed"; return; }
        P=/sys/kernel/debug/ntb_perf/$BDF
        until_ok 30 grep -q "Link status: up" $P/info
        # side 0 first, then side 1; the other keeps its end (the service) running
        for turn in 0 1; do
                barrier perf-$turn
                [ $turn = $SIDE ] || continue
                ok=no
                for i in $(seq 1 100); do
                        echo 0 >$P/run 2>/dev/null && ok=yes && break
                        sleep 0.2
                done
                out=$(cat $P/run)
                mbps=$(echo "$out" | sed -n 's/.* \([0-9]*\) MBytes\/s.*/\1/p' | head -n 1)
                if [ $ok = yes ] && [ -n "$mbps" ]; then
                        result perf-run ok "$(echo "$out" | tr '\n' ' ')"
                        echo "FIGURE ntb_perf_MBps_side$SIDE $mbps MB/s"
                        echo "$out" | sed -n 's/.*copied \([0-9]*\) bytes in \([0-9]*\) usecs.*/FIGURE ntb_perf_usecs_side'$SIDE' \2 us/p' | head -n 1
                else
                        result perf-run FAIL "run: '$out'; info: $(cat $P/info | tr '\n' ' ')"
                fi
        done
        barrier perf-done
        rmmod ntb_perf
}

# ---- ntbfab on the NTB: ntbfabd on both guests with backend linux-ntb, libsisci's examples
# between them (servers on b, clients on a), and what a killed daemon leaves ----
lntb_state() { ntbfab-ntbtest state /dev/ntbfab-ntb0 /sys/kernel/debug/ntb_hw_ivshmem/$BDF/state; }
lntb_client() { # NAME PROG ARGS...: one example against guest b's server, its result line
        name=$1 prog=$2
        shift 2
        barrier sx-$name || return
        if out=$(timeout 120 sisci-$prog -rn 8 "$@" 2>&1); then
                result lntb-sisci-$name ok "$(echo "$out" | tr '\n' ' ' | tr -s ' ')"
                echo "$out" | sed -n "s/.*median \([0-9.]*\) us.*/FIGURE lntb_sisci_${name}_median_us \1 us/p" | head -n 1
                echo "$out" | sed -n 's/.*remote segment \([0-9.]*\) MB\/s.*/FIGURE lntb_sisci_memcpy_remote_MBps \1 MB\/s/p'
        else
                result lntb-sisci-$name FAIL "rc $?: $(echo "$out" | tr '\n' ' ')"
        fi
}
lntb_server() { # NAME PROG ARGS...: serve guest a's client once
        name=$1 prog=$2
        shift 2
        timeout 120 sisci-$prog -rn 4 -server "$@" >/tmp/sx-$name.log 2>&1 &
        sx=$!
        barrier sx-$name || return
        wait $sx || result lntb-sisci-$name-server FAIL "rc $?: $(tr '\n' ' ' </tmp/sx-$name.log)"
}
# Guest a's QEMU NVMe drive reads into guest b's segment through the NTB (ntbfab-nvmep2p): b
# makes a segment of its memory for export available, filled with a stale pattern; a asks
# ntbfab for the drive's address of part of it (SCIMapRemoteSegmentForDevice) and issues NVMe
# Reads whose PRPs are that address; b reads its NTB's translation back through the character
# device while a holds the mapping and after a released it, and checks the bytes against the
# drive's (the harness wrote them from the seed NVME_SEED).
NV_SEG=0x4e5650 NV_SIZE=2621440 NV_OFF=262144 NV_LEN=2097152 NV_LBA=1000
lntb_nvme() {
        read n0 idle </proc/uptime
        lntb_nvme_run
        read n1 idle </proc/uptime
        echo "FIGURE lntb_nvme_s_$ROLE $(awk "BEGIN {print $n1 - $n0}") s"
}
lntb_nvme_run() {
        if [ $ROLE = b ]; then
                ntbfab-nvmep2p serve $NV_SEG $NV_SIZE $NV_OFF $NV_LEN $NV_LBA ${NVME_SEED:-0} >/tmp/nv.log 2>&1 &
                nv=$!
                until_ok 60 grep -q -E '^(ready|failed)' /tmp/nv.log
        fi
        barrier nvme-ready || return
        if [ $ROLE = a ]; then
                ntbfab-nvmep2p read 8 $NV_SEG $NV_OFF $NV_LEN $NV_LBA >/tmp/nv.log 2>&1 &
                nv=$!
                until_ok 120 grep -q -E '^(held|failed)' /tmp/nv.log
        fi
        barrier nvme-held || return
        if [ $ROLE = b ]; then
                held=$(lntb_state)
                if echo "$held" | grep -q "mw_trans 0x[1-9a-f]"; then
                        result lntb-nvme-translated ok "while guest a's drive holds its mapping, this NTB translates window 0 into the pool: $held"
                else
                        result lntb-nvme-translated FAIL "no translation while guest a's drive holds its mapping: $held"
                fi
        fi
        barrier nvme-release || return
        if [ $ROLE = a ]; then
                kill -USR1 $nv
                wait $nv
                cat /tmp/nv.log
        fi
        barrier nvme-released || return
        if [ $ROLE = b ]; then
                until_ok 10 sh -c "ntbfab-ntbtest state /dev/ntbfab-ntb0 /sys/kernel/debug/ntb_hw_ivshmem/$BDF/state | grep -q '^owner [1-9][0-9]* opens [0-9]* mw_trans 0 '"
                after=$(lntb_state)
                if echo "$after" | grep -q "^owner [1-9][0-9]* opens [0-9]* mw_trans 0 .* hw_trans 0 "; then
                        result lntb-nvme-unmapped ok "guest a unmapped, disconnected and returned the drive: no translation left ($after)"
                else
                        result lntb-nvme-unmapped FAIL "guest a released its mapping, yet: $after"
                fi
                kill -USR1 $nv
                wait $nv
                cat /tmp/nv.log
        fi
}
# Guest a: the drive is not VFIO's, yet the manager has it where this kernel placed it (the
# linux-ntb backend's dev_bars reads sysfs), not where the cluster file's model would.
lntb_bars() {
        [ $ROLE = a ] || return 0
        res=$(sed -n 1p /sys/bus/pci/devices/0000:00:10.0/resource | cut -d' ' -f1)
        want=$(printf 0x%x $((res)))
        out=$(ntbfab device show guesta.nvme0 2>&1)
        bar0=$(echo "$out" | grep "BAR0")
        if [ "$((res))" != 0 ] && echo "$bar0" | grep -q "at $want (.*where its host placed it"; then
                result lntb-nvme-bars ok "sysfs BAR0 $want; ntbfab device show: $bar0"
        else
                result lntb-nvme-bars FAIL "sysfs BAR0 $want; ntbfab device show: $(echo "$out" | tr '\n' ' ')"
        fi
}
step_lntb() {
        if ! command -v ntbfabd >/dev/null || ! command -v sisci-pingpong >/dev/null ||
                ! command -v ntbfab-nvmep2p >/dev/null; then
                result lntb-daemon FAIL "no ntbfabd, SISCI examples or ntbfab-nvmep2p in this guest (kerneltier.py --prog)"
                return
        fi
        insmod $E/ntbfab_ntb.ko || { result lntb-daemon FAIL "insmod ntbfab_ntb failed"; return; }
        until_ok 10 test -c /dev/ntbfab-ntb0
        # the windows' addresses: ntb_hw_ivshmem's slices of the peer's carve-out in BAR 2
        pci=$(cat /sys/class/misc/ntbfab-ntb0/pci_dev)
        bar=$(sed -n 3p /sys/bus/pci/devices/$pci/resource | cut -d' ' -f1)
        export NTBFAB_DIR=/run/ntbfab NTBFAB_NODE=guest$ROLE
        mkdir -p $NTBFAB_DIR
        sed "s/@W0@/$(printf 0x%x $((bar + 0x1d000000)))/" \
                /etc/ntbfab/lntb.yaml >$NTBFAB_DIR/cluster.yaml
        cp /etc/ntbfab/cluster.key $NTBFAB_DIR/cluster.key
        chmod 600 $NTBFAB_DIR/cluster.key
        ntbfabd --config $NTBFAB_DIR/cluster.yaml --node guest$ROLE --dir $NTBFAB_DIR --quiet &
        DPID=$!
        log=$NTBFAB_DIR/log/guest$ROLE.log
        if [ $ROLE = b ]; then
                until_ok 60 grep -q "joined the fabric manager" $log
        else
                until_ok 60 test -S $NTBFAB_DIR/run/guesta.sock
        fi
        st=$(lntb_state)
        if kill -0 $DPID 2>/dev/null && echo "$st" | grep -q "^owner $DPID "; then
                result lntb-daemon ok "ntbfabd (pid $DPID) on backend linux-ntb owns /dev/ntbfab-ntb0: $st"
        else
                result lntb-daemon FAIL "ntbfabd $(kill -0 $DPID 2>/dev/null && echo runs || echo exited); $st; $(tail -n 8 $log | tr '\n' ' ')"
        fi
        barrier lntb-up || return
        lntb_bars
        for x in "pingpong pingpong -loops 200" "memcpy_bw memcpy_bw -size 1048576 -rounds 5" \
                "dma-write dma -max 1048576" "dma-read dma -max 1048576 -read" \
                "intlat intlat -size 64 -loops 100" "intlat-data intlat -data -size 64 -loops 100"; do
                if [ $ROLE = a ]; then lntb_client $x; else lntb_server $x; fi
        done
        barrier lntb-sisci-done
        lntb_nvme
        # SIGKILL the daemon while intlat holds both sides' interrupts connected, so that each
        # guest's NTB translates toward its pool: the daemon's close undoes it (read back
        # through the character device by a read-only open, and in the emulated NTB's own
        # registers)
        if [ $ROLE = a ]; then
                timeout 120 sisci-intlat -rn 8 -loops 1000000 >/tmp/sx-hold.log 2>&1 &
        else
                timeout 120 sisci-intlat -rn 4 -server -loops 1000000 >/tmp/sx-hold.log 2>&1 &
        fi
        hold=$!
        until_ok 60 sh -c "ntbfab-ntbtest state /dev/ntbfab-ntb0 /sys/kernel/debug/ntb_hw_ivshmem/$BDF/state | grep -q 'mw_trans 0x[1-9a-f]'"
        before=$(lntb_state)
        barrier lntb-kill
        kill -KILL $DPID
        wait $DPID 2>/dev/null
        until_ok 10 sh -c "ntbfab-ntbtest state /dev/ntbfab-ntb0 /sys/kernel/debug/ntb_hw_ivshmem/$BDF/state | grep -q '^owner 0 '"
        after=$(lntb_state)
        # the example's own opens and buffers go with it
        kill -TERM $hold 2>/dev/null
        wait $hold 2>/dev/null
        until_ok 10 sh -c "ntbfab-ntbtest state /dev/ntbfab-ntb0 /sys/kernel/debug/ntb_hw_ivshmem/$BDF/state | grep -q ' bufs 0 '"
        gone=$(lntb_state)
        if echo "$before" | grep -q "mw_trans 0x[1-9a-f].* hw_trans 0x[1-9a-f]" &&
                echo "$after" | grep -q "^owner 0 opens [0-9]* mw_trans 0 peer_mw_trans 0 bufs [0-9]* hw_trans 0 0$" &&
                echo "$gone" | grep -q "^owner 0 opens 0 mw_trans 0 peer_mw_trans 0 bufs 0 hw_trans 0 0$"; then
                result lntb-kill-clears ok "with intlat connected: $before; after ntbfabd's SIGKILL: $after; intlat gone too: $gone"
        else
                result lntb-kill-clears FAIL "with intlat connected: $before; after ntbfabd's SIGKILL: $after; intlat gone too: $gone; intlat: $(tr '\n' ' ' </tmp/sx-hold.log)"
        fi
        barrier lntb-done
        echo "ktier: ntbfabd's log (guest $ROLE):"
        tail -n 40 $log
        rmmod ntbfab_ntb
}

# ---- ntbfab-conformance on backend linux-ntb: both ends of one emulated NTB in guest a ----
# ntb_hw_ivshmem pair=1 binds guest a's loopback devices (peer ids 2 and 3, both on a's own
# RAM; side 1's carve-out at carve_base1), so that one process opens both adapters of a pair.
# Every check the suite prints becomes a result: passed, failed (the step fails), or not
# claimed by the backend (reported as such).
CARVE1=0x1a000000
conform_tap() { # PREFIX: the suite's TAP output -> RESULT lines, one per check and subject
        awk -v pre="$1" '
        function flush() { if (name != "") print "RESULT " name " " st " " why; name = "" }
        /^(not )?ok [0-9]+ - / {
                flush()
                line = $0
                sub(/^(not )?ok [0-9]+ - /, "", line)
                chk = line; sub(/ \[.*/, "", chk)
                subj = line; sub(/^[^[]*\[/, "", subj); sub(/\].*/, "", subj)
                gsub(/ -> /, "->", subj); gsub(/ /, "_", subj)
                rest = line; sub(/^[^]]*\] ?/, "", rest)
                name = pre chk "@" subj
                st = $1 == "not" ? "FAIL" : "ok"
                why = $1 == "not" ? "failed " rest : "passed " rest
                if (rest ~ /^# SKIP not claimed: /) { sub(/^# SKIP /, "", rest); why = rest }
                else if (rest ~ /^# SKIP /) { sub(/^# SKIP /, "", rest); why = "skipped: " rest }
                next
        }
        /^  # / && name != "" { r = $0; sub(/^  # /, "", r); why = why ": " r; next }
        { flush() }
        END { flush() }'
}
step_conform() {
        if [ $ROLE = b ]; then
                barrier conform-done
                return
        fi
        if ! command -v ntbfab-conformance >/dev/null; then
                result conform-linux-ntb FAIL "no ntbfab-conformance in this guest (kerneltier.py --prog)"
                barrier conform-done
                return
        fi
        rmmod ntb_hw_ivshmem
        insmod $E/ntb_hw_ivshmem.ko pair=1 carve_base1=$CARVE1 &&
                until_ok 10 test "$(ls /sys/bus/ntb/devices | wc -l)" -eq 2
        C=/etc/ntbfab/conform-run.yaml
        sed=""
        for d in $(ls /sys/bus/ntb/devices); do
                st=/sys/kernel/debug/ntb_hw_ivshmem/$d/state
                side=$(sed -n 's/^side \([01]\).*/\1/p' $st 2>/dev/null)
                [ -n "$side" ] || continue
                # the peer side's carve-out through this device's BAR 2: window 1 (16 MiB) at
                # its start, window 0 (4 MiB) after it
                bar=$(sed -n 3p /sys/bus/pci/devices/$d/resource | cut -d' ' -f1)
                peer=$((side ? 0x1c000000 : CARVE1))
                sed="$sed -e s/@BDF$side@/$d/ -e s/@W${side}_1@/$(printf 0x%x $((bar + peer)))/"
                sed="$sed -e s/@W${side}_0@/$(printf 0x%x $((bar + peer + 0x1000000)))/"
        done
        if [ "$(ls /sys/bus/ntb/devices | wc -l)" -eq 2 ] && sed $sed /etc/ntbfab/conform.yaml >$C &&
                ! grep -q @ $C; then
                result conform-hw-probe ok "two NTB devices in this guest, both ends of one emulated NTB: $(dmesg | grep 'emulated NTB side' | tail -n 2 | sed 's/^.*emulated/emulated/' | tr '\n' ';')"
        else
                result conform-hw-probe FAIL "ntb_hw_ivshmem pair=1: $(ls /sys/bus/ntb/devices | tr '\n' ' '); $(dmesg | grep -i ntb_hw | tail -n 4 | tr '\n' ' ')"
        fi
        insmod $E/ntbfab_ntb.ko
        until_ok 10 test -c /dev/ntbfab-ntb1
        # each side issues once (A issues, B receives in the pair checks)
        for dir in "side0.ntb0 side1.ntb0 conform-" "side1.ntb0 side0.ntb0 conform-rev-"; do
                set -- $dir
                read c0 idle </proc/uptime
                timeout 120 ntbfab-conformance --config $C --a $1 --b $2 --timeout-ms 10000 \
                        --fixed-windows ${CONFORM_ONLY:+--only $CONFORM_ONLY} >/tmp/conform.tap 2>&1
                rc=$?
                read c1 idle </proc/uptime
                cat /tmp/conform.tap
                conform_tap $3 </tmp/conform.tap
                sum=$(grep -E '^# [0-9]+ checks: ' /tmp/conform.tap | sed 's/^# //')
                if [ $rc = 0 ] && echo "$sum" | grep -q ' 0 failed' && ! echo "$sum" | grep -q ': 0 passed'; then
                        result ${3}linux-ntb ok "$1 -> $2: $sum; $(grep claims: /tmp/conform.tap | sed 's/^# //' | tr '\n' ';')"
                else
                        result ${3}linux-ntb FAIL "$1 -> $2: rc $rc: ${sum:-$(tail -n 5 /tmp/conform.tap | tr '\n' ' ')}"
                fi
                echo "FIGURE ${3}s $(awk "BEGIN {print $c1 - $c0}") s" | sed 's/-/_/g'
        done
        # the switchtec backend on the same NTB, with the register model of a switch attached:
        # the model is a process over stx.gas in the suite's instance directory, which the
        # backend maps as it would map the switch's GAS
        if command -v ntbfab-stxmodel >/dev/null; then
                X=/run/conform-stx
                mkdir -p $X
                sed $sed /etc/ntbfab/conform-stx.yaml >$X/cluster.yaml
                ntbfab-stxmodel --gas $X/stx.gas --format --rid-size 16 >/tmp/stxmodel.log 2>&1 &
                MP=$!
                until_ok 10 grep -q ready /tmp/stxmodel.log
                read c0 idle </proc/uptime
                timeout 120 ntbfab-conformance --config $X/cluster.yaml --dir $X --timeout-ms 10000 \
                        --fixed-windows ${CONFORM_ONLY:+--only $CONFORM_ONLY} >/tmp/conform.tap 2>&1
                rc=$?
                read c1 idle </proc/uptime
                cat /tmp/conform.tap
                conform_tap conform-stx- </tmp/conform.tap
                sum=$(grep -E '^# [0-9]+ checks: ' /tmp/conform.tap | sed 's/^# //')
                if [ $rc = 0 ] && echo "$sum" | grep -q ' 0 failed' && ! echo "$sum" | grep -q ': 0 passed' &&
                        kill -0 $MP 2>/dev/null; then
                        result conform-stx-switchtec ok "side0.ntb0 -> side1.ntb0 with the switch model: $sum; $(grep claims: /tmp/conform.tap | sed 's/^# //' | tr '\n' ';')"
                else
                        result conform-stx-switchtec FAIL "rc $rc: ${sum:-$(tail -n 5 /tmp/conform.tap | tr '\n' ' ')}; the model $(kill -0 $MP 2>/dev/null && echo runs || echo exited): $(tr '\n' ' ' </tmp/stxmodel.log)"
                fi
                echo "FIGURE conform_stx_s $(awk "BEGIN {print $c1 - $c0}") s"
                kill -TERM $MP 2>/dev/null
                wait $MP 2>/dev/null
        else
                result conform-stx-switchtec FAIL "no ntbfab-stxmodel in this guest (kerneltier.py --prog)"
        fi
        rmmod ntbfab_ntb
        rmmod ntb_hw_ivshmem
        hw_load || result conform-restore FAIL "reloading ntb_hw_ivshmem (pair 0) failed"
        barrier conform-done
}

for f in /etc/kernel-tier/*; do
        [ -f "$f" ] && . "$f"
done
for s in $STEPS; do
        barrier start-$s || break
        echo "ktier: step $s"
        read t0 idle </proc/uptime
        step_$s
        read t1 idle </proc/uptime
        echo "FIGURE step_${s}_s_$ROLE $(awk "BEGIN {print $t1 - $t0}") s"
done
echo "ktier: dmesg (NTB lines)"
dmesg | grep -i -E 'ntb|ivshmem' | tail -n 40
echo "KTIER DONE $ROLE"
poweroff -f
