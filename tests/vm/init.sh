#!/bin/busybox sh
# tests/vm/init.sh: /init of the VM tier's guests (docs/vm.md): guest a drives the NVMe through
# ntbfabd and VFIO, guest b is the other end of the ivshmem link. Results go to the console.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /run /tmp
mount -t tmpfs tmpfs /run
read up idle </proc/uptime
ROLE=$(sed -n 's/.*vmtier.role=\([a-z]*\).*/\1/p' /proc/cmdline)
# vmtier.py --only STEP (development): run that step of guest a's list only.
ONLY=$(sed -n 's/.*vmtier.only=\([a-z]*\).*/\1/p' /proc/cmdline)
step() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }
echo "FIGURE boot_to_init_s_$ROLE $up s"
if [ "$ROLE" = probe ]; then
        # vmtier.py's accelerator probe: reaching /init is all it asks.
        echo "VMTIER PROBE OK"
        poweroff -f
fi

result() { echo "RESULT $1 $2 $3"; }

# Modules in dependency order (the harness resolved it); no modprobe or depmod needed.
for m in $(cat /lib/modules/order); do
        insmod /lib/modules/$m.ko || echo "vmtier: insmod $m failed"
done
ifconfig lo 127.0.0.1 up
# The guests' network (a QEMU dgram pair, nothing else on it): the daemons' peer protocol.
case "$ROLE" in a) IP=10.99.0.4 PEER=10.99.0.8 ;; *) IP=10.99.0.8 PEER=10.99.0.4 ;; esac
ifconfig eth0 $IP netmask 255.255.255.0 up || echo "vmtier: no eth0"

NV=""
IV=""
for d in /sys/bus/pci/devices/*; do
        [ "$(cat $d/class)" = 0x010802 ] && NV=$(basename $d)
        [ "$(cat $d/vendor)" = 0x1af4 ] && [ "$(cat $d/device)" = 0x1110 ] && IV=$(basename $d)
done
echo "vmtier: role $ROLE, NVMe ${NV:-none}, ivshmem ${IV:-none}"

export NTBFAB_DIR=/run/ntbfab NTBFAB_NODE=guest$ROLE
mkdir -p $NTBFAB_DIR
sed "s/@NVME@/${NV:-0000:00:1f.7}/" /etc/ntbfab/cluster.yaml >$NTBFAB_DIR/cluster.yaml
cp /etc/ntbfab/cluster.key $NTBFAB_DIR/cluster.key

# ntbfab-nvme (docs/nvme.md) on the lent NVMe, fdid 0x4000 (node id 4, its first device).
nvme_tool() {
        F=0x4000
        ntbfab-nvme manager --fdid $F >/tmp/mgr.out 2>&1 &
        MPID=$!
        for i in $(seq 1 300); do grep -q "manager ready" /tmp/mgr.out && break; sleep 0.1; done
        if ! grep -q "manager ready" /tmp/mgr.out; then
                result nvme-tool-manager FAIL "no 'manager ready' in 30 s: $(tail -n 5 /tmp/mgr.out)"
                kill -TERM $MPID
                wait $MPID
                return
        fi
        result nvme-tool-manager ok "$(grep -m1 'manager ready' /tmp/mgr.out)"
        read t0 idle </proc/uptime
        out=$(ntbfab-nvme identify --fdid $F 2>&1)
        rc=$?
        read t1 idle </proc/uptime
        model=$(echo "$out" | sed -n 's/^  model *//p')
        if [ $rc = 0 ] && [ "$model" = "QEMU NVMe Ctrl" ]; then
                result nvme-tool-identify ok "model '$model', $(echo "$out" | grep 'namespace 1' | sed 's/^ *//')"
                # The whole process: attach, borrow, join the manager, Identify, leave.
                echo "FIGURE nvme_tool_identify_process_ms $(awk "BEGIN {print ($t1 - $t0) * 1000}") ms"
        else
                result nvme-tool-identify FAIL "rc $rc, model '$model': $out"
        fi
        # Two clients at once (--together 2: neither starts writing before both hold a queue
        # pair), each writing then verifying its own range with its own pattern: client 1 in 1,000
        # commands of 4 KiB in a random order (--random: each block once), client 2 in 8 commands
        # of 1 MiB (the controller's largest, mdts=8: PRP1 and a list of 255 entries).
        for c in 1 2; do
                # lba, blocks of 512 bytes, bytes per command, queue depth, commands, order
                [ $c = 1 ] && set -- 0 8000 4KiB 8 1000 --random || set -- 32768 16384 1MiB 2 8
                (ntbfab-nvme write --fdid $F --lba $1 --blocks $2 --seed $c --bs $3 --qd $4 $6 \
                        --together 2 >/tmp/w$c.out 2>&1 &&
                        ntbfab-nvme verify --fdid $F --lba $1 --blocks $2 --seed $c --bs $3 \
                                --qd $4 $6 >/tmp/v$c.out 2>&1
                        echo $? >/tmp/rc$c) &
                eval C$c=$!
                eval N$c=$5
        done
        wait $C1 $C2
        ok=0
        for c in 1 2; do
                eval n=\$N$c
                [ "$(cat /tmp/rc$c)" = 0 ] && grep -q "result .* $n commands ($n reads, 0 writes)" /tmp/v$c.out &&
                        grep -q "result .* $n commands (0 reads, $n writes)" /tmp/w$c.out && ok=$((ok + 1))
        done
        joins=$(grep -c "joined as slot" /tmp/mgr.out)
        if [ $ok = 2 ]; then
                result nvme-tool-manager-2-clients ok "2 clients at once wrote and verified 1,000 random blocks of 4 KiB and 8 MiB in 1 MiB commands; the manager saw $joins joins: $(grep -m1 'result' /tmp/v1.out | sed 's/^ *//'); $(grep -m1 'result' /tmp/v2.out | sed 's/^ *//')"
                echo "FIGURE nvme_tool_bytes_verified $((8000 * 512 + 16384 * 512)) bytes"
        else
                result nvme-tool-manager-2-clients FAIL "client 1: rc $(cat /tmp/rc1) $(tail -n 3 /tmp/v1.out /tmp/w1.out); client 2: rc $(cat /tmp/rc2) $(tail -n 3 /tmp/v2.out /tmp/w2.out)"
        fi
        # Client 1's blocks checked against client 2's pattern: the check must see the difference.
        out=$(ntbfab-nvme verify --fdid $F --lba 0 --blocks 128 --seed 2 2>&1)
        rc=$?
        case "$rc:$out" in
        1:*"read data other than the pattern of seed 2"*) result nvme-tool-verify-detects ok "$(echo "$out" | tail -n 1)" ;;
        *) result nvme-tool-verify-detects FAIL "rc $rc: $out" ;;
        esac
        out=$(ntbfab-nvme bench --fdid $F --rw randread --bs 4KiB --qd 1 --ios 1000 2>&1)
        rc=$?
        lat=$(echo "$out" | grep "latency ns")
        if [ $rc = 0 ] && [ -n "$lat" ]; then
                result nvme-tool-qd1 ok "$(echo "$lat" | sed 's/^ *//')"
                echo "$lat" | awk '{for (i = 1; i < NF; i++) { if ($i == "p50") m = $(i + 1); if ($i == "p99") p = $(i + 1) }
                        printf "FIGURE nvme_tool_read4k_qd1_median_us %.1f us\nFIGURE nvme_tool_read4k_qd1_p99_us %.1f us\n", m / 1000, p / 1000}'
        else
                result nvme-tool-qd1 FAIL "rc $rc: $out"
        fi
        kill -TERM $MPID
        wait $MPID
        if grep -q "manager stopped" /tmp/mgr.out; then
                result nvme-tool-manager-stopped ok "stopped on SIGTERM after creating $(grep -c 'created queue pair' /tmp/mgr.out) queue pairs for $joins+ clients"
        else
                result nvme-tool-manager-stopped FAIL "$(tail -n 5 /tmp/mgr.out)"
        fi
        echo "vmtier: manager log:"
        cat /tmp/mgr.out
        # libsisci's own SmartIO example: its queues and buffer are a (non-private) segment,
        # the adapter's memory for export, mapped for the NVMe through VFIO by address.
        for mode in "" -hints; do
                out=$(timeout 60 sisci-nvme_identify -fdid $F $mode 2>&1)
                rc=$?
                if [ $rc = 0 ] && echo "$out" | grep -q "model: QEMU NVMe Ctrl"; then
                        result sisci-nvme_identify$mode ok "$(echo "$out" | tr '\n' ' ')"
                else
                        result sisci-nvme_identify$mode FAIL "rc $rc: $out"
                fi
        done
}

# The SISCI examples between the guests (libsisci over the ivshmem adapters, segments
# connected through the fabric manager on guest a): servers on b (node 8), clients on a.
SX_PORT=7001
sisci_servers() {
        ntbfabd --config $NTBFAB_DIR/cluster.yaml --node guestb --dir $NTBFAB_DIR --quiet &
        DPID=$!
        # Segments are made available through the fabric manager (guest a's daemon): wait
        # until this daemon has joined it over the network.
        for i in $(seq 1 300); do
                grep -q "joined the fabric manager" $NTBFAB_DIR/log/guestb.log 2>/dev/null && break
                sleep 0.1
        done
        # Guest a says when its clients start (its other tests use the ivshmem link first).
        if ! timeout 150 nc -l -p $SX_PORT </dev/null >/tmp/go; then
                result sisci-go-signal FAIL "guest a never said go on port $SX_PORT"
                kill -TERM $DPID
                wait $DPID
                return
        fi
        for x in "pingpong pingpong -loops 200" "memcpy_bw memcpy_bw -size 1048576" \
                "dma-write dma -max 1048576" "dma-read dma -max 1048576" \
                "intlat intlat -loops 100" "intlat-data intlat -data -size 64 -loops 100"; do
                set -- $x
                name=$1 prog=$2
                shift 2
                if out=$(timeout 90 sisci-$prog -rn 4 -server "$@" 2>&1); then
                        result sisci-$name-server ok "served node 4 and exited 0 $out"
                else
                        result sisci-$name-server FAIL "rc $?: $out"
                fi
        done
        kill -TERM $DPID
        wait $DPID
        echo "vmtier: daemon log:"
        cat $NTBFAB_DIR/log/guestb.log
}

sisci_clients() {
        go=no
        for i in $(seq 1 300); do
                echo go | nc $PEER $SX_PORT 2>/dev/null && go=yes && break
                sleep 0.2
        done
        if [ $go = no ]; then
                result sisci-peer-reachable FAIL "guest b did not answer on $PEER:$SX_PORT"
                return
        fi
        result sisci-peer-reachable ok "guest b answered on $PEER:$SX_PORT"
        out=$(timeout 90 sisci-pingpong -rn 8 -loops 200 2>&1)
        rc=$?
        figs=$(echo "$out" | sed -n 's/.*200 round trips of 4 bytes: median \([0-9.]*\) us, p99 \([0-9.]*\) us.*/FIGURE sisci_pingpong_rtt_median_us \1 us\nFIGURE sisci_pingpong_rtt_p99_us \2 us/p')
        if [ $rc = 0 ] && [ -n "$figs" ]; then
                result sisci-pingpong ok "$out"
                echo "$figs"
        else
                result sisci-pingpong FAIL "rc $rc: $out"
        fi
        # memcpy_bw checks with memcmp that the remote segment holds what it copied; its
        # baseline is guest b writing the same segment itself, in turns with the same code.
        out=$(timeout 90 sisci-memcpy_bw -rn 8 -size 1048576 -rounds 5 2>&1)
        rc=$?
        figs=$(echo "$out" | sed -n 's/.*remote segment \([0-9.]*\) MB\/s, the same memory from its own host \([0-9.]*\) MB\/s, ratio \([0-9.]*\).*/FIGURE sisci_memcpy_remote_MBps \1 MB\/s\nFIGURE sisci_memcpy_owner_MBps \2 MB\/s\nFIGURE sisci_memcpy_ratio \3 x/p')
        if [ $rc = 0 ] && [ -n "$figs" ]; then
                result sisci-memcpy_bw ok "$out"
                echo "$figs"
                echo "FIGURE sisci_bytes_verified_memcpy 1048576 bytes"
        else
                result sisci-memcpy_bw FAIL "rc $rc: $out"
        fi
        # dma checks the bytes that arrived through a mapping of the remote segment.
        for mode in write read; do
                flag=""
                [ $mode = read ] && flag=-read
                out=$(timeout 90 sisci-dma -rn 8 -max 1048576 $flag 2>&1)
                rc=$?
                big=$(echo "$out" | awk '$1 == 1048576 {print $3}')
                if [ $rc = 0 ] && [ -n "$big" ]; then
                        result sisci-dma-$mode ok "$(echo "$out" | tr '\n' ' ' | tr -s ' ')"
                        echo "FIGURE sisci_dma_${mode}_1MiB_MBps $big MB/s"
                        # Every size's bytes were checked through a mapping of the segment.
                        echo "$out" | awk '$1 ~ /^[0-9]+$/ {n += $1} END {print "FIGURE sisci_bytes_verified_dma_'$mode' " n " bytes"}'
                else
                        result sisci-dma-$mode FAIL "rc $rc: $out"
                fi
        done
        # Interrupts: a word of B's exported memory written through A's window, seen by the
        # watcher thread of the process that created the interrupt (docs/vm.md).
        for mode in "" -data; do
                name=intlat${mode:+-data}
                out=$(timeout 90 sisci-intlat -rn 8 $mode -size 64 -loops 100 2>&1)
                rc=$?
                if [ $rc = 0 ] && echo "$out" | grep -q "round trips with node 8: 100 of them"; then
                        result sisci-$name ok "$out"
                        f=sisci_${name#sisci-}
                        f=$(echo "$f" | tr '-' '_')
                        echo "$out" | sed -n "s/.*median \([0-9.]*\) us, p99 \([0-9.]*\) us.*/FIGURE ${f}_rtt_median_us \1 us\nFIGURE ${f}_rtt_p99_us \2 us/p"
                else
                        result sisci-$name FAIL "rc $rc: $out"
                fi
        done
}

driver() { basename "$(readlink /sys/bus/pci/devices/$1/driver 2>/dev/null)" 2>/dev/null; }

if [ "$ROLE" = a ]; then
        ntbfabd --config $NTBFAB_DIR/cluster.yaml --node guesta --dir $NTBFAB_DIR --quiet &
        DPID=$!
        for i in $(seq 1 200); do [ -S $NTBFAB_DIR/run/guesta.sock ] && break; sleep 0.1; done
        # The lender binds itself as the device's driver (docs/daemon.md, "Real devices"),
        # refusing to steal it.
        before=$(driver $NV)
        out=$(ntbfab lend guesta $NV 2>&1)
        rc=$?
        case "$rc:$before:$out" in
        1:nvme:*"kernel driver 'nvme'"*--force*) result lend-refused-in-use ok "$out" ;;
        *) result lend-refused-in-use FAIL "rc $rc, driver '$before': $out" ;;
        esac
        out=$(ntbfab lend --force guesta $NV 2>&1)
        rc=$?
        after=$(driver $NV)
        if [ $rc = 0 ] && [ "$after" = vfio-pci ]; then
                result lend-force ok "unbound 'nvme', bound to vfio-pci: $out"
        else
                result lend-force FAIL "rc $rc, driver '$after': $out"
        fi
        if step tool; then
                # The distributed NVMe driver, unchanged (apps/nvme over libsisci over the
                # device API): a manager and two client processes on QEMU's NVMe via VFIO.
                nvme_tool $NV
        fi
        if step nvme; then
                ntbfab-vmtest nvme $NV
                # The IOMMU's own account of the negative test: a DMA remapping fault.
                f=$(dmesg | grep -c 'DMAR.*fault')
                if [ "$f" -gt 0 ]; then
                        result iommu-fault-logged ok "$f DMAR fault line(s): $(dmesg | grep -m1 'fault addr')"
                else
                        result iommu-fault-logged FAIL "no DMAR fault in the kernel log"
                fi
        fi
        if step share; then
                ntbfab-vmtest share $NV | tee /tmp/share.out
                # The daemon, not the dead process, unmapped what it left in the IOMMU.
                pid=$(sed -n 's/.*killed client 2 (pid \([0-9]*\)).*/\1/p' /tmp/share.out)
                c=$(grep "cleared .* KiB of DMA mappings .*(pid $pid)" $NTBFAB_DIR/log/guesta.log)
                if [ -n "$pid" ] && [ -n "$c" ]; then
                        result daemon-cleared-dead-client ok "${c#* * }"
                else
                        result daemon-cleared-dead-client FAIL "no cleared share for the killed pid '$pid'"
                fi
        fi
        step window && ntbfab-vmtest window $NV
        step sisci && sisci_clients
        # A restart keeps the lend: the device stays on vfio-pci, the new daemon takes it
        # again, and the driver to give it back to comes from the node's database.
        kill -TERM $DPID
        wait $DPID
        kept=$(driver $NV)
        ntbfabd --config $NTBFAB_DIR/cluster.yaml --node guesta --dir $NTBFAB_DIR --quiet &
        DPID=$!
        for i in $(seq 1 200); do [ -S $NTBFAB_DIR/run/guesta.sock ] && break; sleep 0.1; done
        if [ "$kept" = vfio-pci ]; then
                ntbfab-vmtest identify $NV restart-keeps-lend
        else
                result restart-keeps-lend FAIL "after the daemon stopped the driver is '$kept'"
        fi
        out=$(ntbfab unlend guesta $NV 2>&1)
        rc=$?
        sleep 0.2
        after=$(driver $NV)
        if [ $rc = 0 ] && [ "$after" = nvme ]; then
                result unlend-restores-driver ok "$out; the driver is 'nvme' again"
        else
                result unlend-restores-driver FAIL "rc $rc, driver '$after': $out"
        fi
        kill -TERM $DPID
        wait $DPID
        echo "vmtier: daemon log:"
        cat $NTBFAB_DIR/log/guesta.log
else
        step window && ntbfab-vmtest window-peer
        step sisci && sisci_servers
fi
echo "VMTIER DONE $ROLE"
poweroff -f
