#!/bin/busybox sh
# tests/shadow/init.sh: /init of the shadow-device guest (docs/kernel.md, "The kernel tier"):
# loopback lending, where the lender and the borrower are two daemons of this one kernel and
# the kernel's own nvme driver drives QEMU's NVMe through a shadow device. Results go to the
# console as RESULT and FIGURE lines.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /run /tmp /mnt
mount -t tmpfs tmpfs /run
if grep -q "shadowtier.mode=probe" /proc/cmdline; then
	# the accelerator probe (guestkit.accelerator): reaching /init is all it asks
	echo "VMTIER PROBE OK"
	poweroff -f
fi
read up idle </proc/uptime
echo "FIGURE boot_to_init_s $up s"
result() { echo "RESULT $1 $2 $3"; }
driver() { basename "$(readlink /sys/bus/pci/devices/$1/driver 2>/dev/null)" 2>/dev/null; }
bar2_size() { set -- $(sed -n 3p /sys/bus/pci/devices/$1/resource); echo $(($2 - $1 + 1)); }

# Modules in dependency order; nvme-core times an I/O out after 3 s (the negative test
# waits for the driver's retry), ntbfab_shadow gets the window onto this RAM.
NV="" NV2="" CTL="" WIN="" MEM=""
for d in /sys/bus/pci/devices/*; do
	b=$(basename $d)
	# the second NVMe (the peer-to-peer target) sits in slot 0x10 (shadowtier.py)
	if [ "$(cat $d/class)" = 0x010802 ]; then
		[ "$b" = 0000:00:10.0 ] && NV2=$b || NV=$b
	fi
	# slot 0x11: the borrower's own memory device (16 MiB), the target of a refused mapping
	if [ "$b" = 0000:00:11.0 ]; then
		MEM=$b
	elif [ "$(cat $d/vendor)" = 0x1af4 ] && [ "$(cat $d/device)" = 0x1110 ]; then
		[ "$(bar2_size $b)" -ge $((256 << 20)) ] && WIN=$b || CTL=$b
	fi
done
echo "shadowtier: NVMe ${NV:-none} and ${NV2:-none}, control region ${CTL:-none}, RAM window ${WIN:-none}, borrower's memory device ${MEM:-none}"
for m in $(cat /lib/modules/order); do
	case $m in
	nvme-core) args="io_timeout=3 admin_timeout=10" ;;
	ntbfab_shadow) args="loopback_window=$WIN" ;;
	*) args="" ;;
	esac
	insmod /lib/modules/$m.ko $args || echo "shadowtier: insmod $m failed"
done
ifconfig lo 127.0.0.1 up

export NTBFAB_DIR=/run/ntbfab
mkdir -p $NTBFAB_DIR
# The second NVMe (nvme1, fdid 0x1001) joins the lender's devices, after nvme0; the borrower
# gets a device of its own (mem0, fdid 0x2000: an ivshmem-plain whose 16 MiB BAR2 is the file
# shadowtier.py filled): every attached device is given a mapping to each of its BARs, and
# BAR2's 64 window slots do not fit beside a 16 MiB DMA window (63 of 128 slots free).
sed "s/@NVME@/$NV/; s/@CTL@/$CTL/g
/bars: \[16KiB\]}/a\\
      - {name: nvme1, bdf: \"$NV2\", vfio: true, class: 0x010802, vendor: 0x1b36, device: 0x0010, bars: [16KiB]}
/^links:/i\\
    devices:\\
      - {name: mem0, bdf: \"$MEM\", vfio: true, class: 0x050000, vendor: 0x1af4, device: 0x1110,\\
         bars: [4KiB, null, {size: 16MiB, prefetchable: true}]}\\

" /etc/ntbfab/loopback.yaml >$NTBFAB_DIR/cluster.yaml
cp /etc/ntbfab/cluster.key $NTBFAB_DIR/cluster.key
F=0x1000
LOGLEVEL=debug
SHADOW=""

daemon() {
	ntbfabd --config $NTBFAB_DIR/cluster.yaml --node $1 --dir $NTBFAB_DIR --quiet --log-level ${LOGLEVEL:-info} &
	eval PID_$1=$!
	for i in $(seq 1 300); do
		grep -q "joined the fabric manager" $NTBFAB_DIR/log/$1.log 2>/dev/null && return 0
		sleep 0.1
	done
	echo "shadowtier: $1's daemon did not join the fabric manager"
	return 1
}
# The budgets in use, as the CLI shows them: equal before the borrow and after the detach.
budgets() { ntbfab status --json | tr -d ' \n' | grep -o '"used":[0-9]*' | tr '\n' ' '; }
# The hardware entries each daemon holds programmed (window slots, requester IDs), as the CLI
# shows them: equal before the borrow and after the detach.
prog() { ntbfab status --json | tr -d ' \n' | grep -o '"programmed":[0-9]*' | tr '\n' ' '; }
# Wait (5 s at most) until what prog shows is $1: the entries are cleared as the return goes.
prog_back() {
	for i in $(seq 1 50); do [ "$(prog)" = "$1" ] && return 0; sleep 0.1; done
	return 1
}
# The manager's allocations (borrows and peer mappings), as the CLI shows them.
allocs() { ntbfab status --json | tr -d ' \n' | grep -o '"allocations":[0-9]*' | head -n 1; }
# The daemon's record of a peer mapping to BAR$2 (0 if not given) of fdid $1 (decimal):
# "phys size device_addr".
peer_rec() {
	ntbfab lspci --node borrower --json | tr -d ' \n' |
		grep -o "\"target\":$1,\"bar\":${2:-0},\"phys\":[0-9]*,\"size\":[0-9]*,\"device_addr\":[0-9]*" |
		sed 's/.*"phys":\([0-9]*\),"size":\([0-9]*\),"device_addr":\([0-9]*\)/\1 \2 \3/'
}
# The module's peer table (debugfs) for shadow device $1 (all of it: -), the range at
# physical address $2 if given: "phys size dev_addr" in decimal.
peer_table() {
	while read id pci phys size dev; do
		[ "$pci" = "$1" ] || [ "$1" = - ] || continue
		[ -z "$2" ] || [ "$((phys))" = "$2" ] && echo "$((phys)) $((size)) $((dev))"
	done </sys/kernel/debug/ntbfab_shadow/peers
}
# dma_map_resource() by shadow device $1 of physical address $2, through the test module.
p2p_map() {
	insmod /lib/modules/extra/ntbfab_p2p_probe.ko dev=$1 phys=$2 size=4096 || return 1
	cat /sys/module/ntbfab_p2p_probe/parameters/addr
	rmmod ntbfab_p2p_probe
}
# Where this kernel has BAR$2 (0 if not given) of device $1, in decimal.
bar0() { set -- $(sed -n $((${2:-0} + 1))p /sys/bus/pci/devices/$1/resource); echo $(($1)); }
# The shadow device's block device, once the nvme driver has brought it up (20 s at most).
wait_disk() {
	for i in $(seq 1 200); do
		for n in /sys/bus/pci/devices/$1/nvme/nvme*/nvme*n1; do
			[ -e "$n" ] && [ -b /dev/$(basename $n) ] && DISK=/dev/$(basename $n) && return 0
		done
		sleep 0.1
	done
	return 1
}

daemon lender && daemon borrower
out=$(ntbfab lend --force lender $NV 2>&1)
[ "$(driver $NV)" = vfio-pci ] || echo "shadowtier: lend failed: $out"
out=$(ntbfab lend --force lender $NV2 2>&1)
[ "$(driver $NV2)" = vfio-pci ] || echo "shadowtier: lend of the second NVMe failed: $out"
before=$(budgets) before_prog=$(prog)

# ---- bench mode (bench/run.sh, docs/kernel.md "Figures"): the same NVMe three ways ---------
if grep -q "shadowtier.mode=bench" /proc/cmdline; then
	IOS=2000
	ntbfab borrow $F --node borrower --attach --json >/tmp/attach 2>&1
	SHADOW=$(tr -d ' \n' </tmp/attach | sed -n 's/.*"attached":{"pci":"\([^"]*\)".*/\1/p')
	if [ -n "$SHADOW" ] && wait_disk $SHADOW; then
		shadowtest bench $DISK shadow $IOS
		# The DMA map's cost, the shadow device's ops against dma-iommu of a device in a
		# kernel IOMMU domain (the control region's, which no driver holds).
		insmod /lib/modules/extra/ntbfab_mapbench.ko shadow=$SHADOW plain=$CTL &&
			rmmod ntbfab_mapbench
		dmesg | sed -n 's/.*ntbfab_mapbench: \(FIGURE .*\)/\1/p'
	else
		result bench-shadow FAIL "no shadow disk: $(cat /tmp/attach)"
	fi
	ntbfab borrow $F --node borrower --detach >/dev/null 2>&1
	ntbfab unlend lender $NV >/dev/null 2>&1
	for i in $(seq 1 100); do [ "$(driver $NV)" = nvme ] && break; sleep 0.1; done
	DISK=""
	wait_disk $NV && shadowtest bench $DISK direct $IOS
	# The same NVMe exported by Linux's NVMe-oF target (nvmet, nvmet-tcp, configured through
	# configfs) and used through nvme-tcp, over this guest's loopback interface.
	if [ -n "$DISK" ]; then
		mount -t configfs none /sys/kernel/config 2>/dev/null
		T=/sys/kernel/config/nvmet
		NQN=nqn.2026-11.org.ntbfab:shadow
		mkdir -p $T/subsystems/$NQN/namespaces/1 $T/ports/1
		echo 1 >$T/subsystems/$NQN/attr_allow_any_host
		echo -n $DISK >$T/subsystems/$NQN/namespaces/1/device_path
		echo 1 >$T/subsystems/$NQN/namespaces/1/enable
		echo tcp >$T/ports/1/addr_trtype
		echo ipv4 >$T/ports/1/addr_adrfam
		echo 127.0.0.1 >$T/ports/1/addr_traddr
		echo 4420 >$T/ports/1/addr_trsvcid
		ln -s $T/subsystems/$NQN $T/ports/1/subsystems/$NQN
		echo "transport=tcp,traddr=127.0.0.1,trsvcid=4420,nqn=$NQN" >/dev/nvme-fabrics
		# The namespace nvme-tcp adds: the block device that is not the PCI one.
		TCP=""
		for i in $(seq 1 100); do
			for b in /dev/nvme*n1; do
				[ -b "$b" ] && [ "$b" != "$DISK" ] && TCP=$b
			done
			[ -n "$TCP" ] && break
			sleep 0.1
		done
		if [ -n "$TCP" ]; then
			shadowtest bench $TCP nvmf_tcp $IOS
		else
			result bench-nvmf-tcp FAIL "no nvme-tcp namespace: $(dmesg | grep -i nvme | tail -n 5)"
		fi
	fi
	kill -TERM $PID_borrower $PID_lender
	wait
	echo "SHADOWTIER DONE guest"
	poweroff -f
fi

# ---- the device file's contract: bad input is refused, nothing changes ------------------
shadowtest uapi

# ---- attach: the stock nvme driver binds to the shadow device --------------------------
read t0 idle </proc/uptime
out=$(ntbfab borrow $F --node borrower --attach --json 2>&1)
rc=$?
attach_out=$out
SHADOW=$(echo "$out" | tr -d ' \n' | sed -n 's/.*"attached":{"pci":"\([^"]*\)".*/\1/p')
if [ $rc = 0 ] && [ -n "$SHADOW" ] && [ -d /sys/bus/pci/devices/$SHADOW ]; then
	result attach ok "borrowed 0x1000 with --attach: shadow device $SHADOW ($(cat /sys/bus/pci/devices/$SHADOW/vendor):$(cat /sys/bus/pci/devices/$SHADOW/device), a PCI domain of its own)"
else
	result attach FAIL "rc $rc: $out; $(dmesg | tail -n 15)"
fi
DISK=""
sleep 1
echo "shadowtier: lender's device command register: $(dd if=/sys/bus/pci/devices/$NV/config bs=1 skip=4 count=2 2>/dev/null | hexdump -C | head -1)"
if [ -n "$SHADOW" ] && wait_disk $SHADOW; then
	read t1 idle </proc/uptime
	result nvme-binds-shadow ok "driver '$(driver $SHADOW)' on $SHADOW, $DISK ($(cat /sys/block/${DISK#/dev/}/size) sectors), model '$(cat /sys/bus/pci/devices/$SHADOW/nvme/nvme*/model | sed 's/ *$//')'"
	echo "FIGURE attach_to_disk_s $(awk "BEGIN {print $t1 - $t0}") s"
else
	result nvme-binds-shadow FAIL "driver '$(driver ${SHADOW:-none})', no namespace: $(dmesg | tail -n 20)"
fi
during=$(budgets)
if [ -n "$before" ] && [ "$before" != "$during" ]; then
	result budgets-taken ok "the borrow holds budgets: used counts went from [$before] to [$during]"
else
	result budgets-taken FAIL "used counts before [$before], during [$during]"
fi

# ---- the shadow's BAR0 window leads to the NVMe's BAR0 where this kernel placed it ----------
# The lender's daemon sends the BARs' sysfs addresses with the lend, and the manager programs
# those, not the model's planning address. The answer puts BAR0 at an offset of the borrower's
# window; the borrower's daemon logs the slot it programmed for it (256 KiB slots: 32 MiB in
# 128) as "programmed slot N of borrower.ivs0 -> lender 0xADDR": ADDR plus the offset in the
# slot must be BAR0 in /sys/bus/pci/devices/$NV/resource.
off=$(echo "$attach_out" | tr -d ' \n' | grep -o '"bars":\[{"bar":0,[^}]*}' | sed -n 's/.*"offset":\([0-9]*\).*/\1/p')
slot=$((${off:-0} / 262144))
far=$(grep -o "programmed slot $slot of borrower.ivs0 -> lender 0x[0-9a-f]*" $NTBFAB_DIR/log/borrower.log | tail -n 1)
far=${far##* }
model=$(ntbfab topology --json $NTBFAB_DIR/cluster.yaml 2>/dev/null | tr -d ' \n' |
	grep -o '"name":"nvme0"[^]]*' | sed -n 's/.*"address":\([0-9]*\).*/\1/p' | head -n 1)
if [ -n "$off" ] && [ -n "$far" ] && [ $((far + off % 262144)) = "$(bar0 $NV)" ]; then
	result bar0-real-address ok "the borrower's slot $slot (BAR0 at window offset $off) translates to $far + $((off % 262144)) = $(printf 0x%x $(bar0 $NV)), BAR0 of $NV as this kernel placed it (the model's planning address: $(printf 0x%x ${model:-0}))"
else
	result bar0-real-address FAIL "BAR0 at window offset '$off', slot $slot programmed to '$far', BAR0 of $NV at $(printf 0x%x $(bar0 $NV)) (model ${model:-?}); $(grep "programmed slot" $NTBFAB_DIR/log/borrower.log | head -n 5)"
fi

# ---- the other way: a borrow through the device API is refused, naming who holds it ---------
out=$(ntbfab borrow $F --node borrower 2>&1)
case "$?:$out" in
1:*"attached to its kernel"*) result refuses-other-way ok "$out" ;;
*) result refuses-other-way FAIL "$out" ;;
esac

# ---- a stopped daemon: the driver's config writes wait in the module, nothing is lost -------
# With the borrower's daemon stopped (SIGSTOP), the driver's side writes Cache Line Size (a
# register QEMU's NVMe keeps and VFIO passes through) 2987 times: more than the module's ring
# of 1024 records holds. Once the daemon runs again, the lender's device has the last value.
if [ -n "$SHADOW" ]; then
	kill -STOP $PID_borrower
	last=$(shadowtest cfgflood $SHADOW 0x0c 2987)
	mine=$(dd if=/sys/bus/pci/devices/$SHADOW/config bs=1 skip=12 count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
	kill -CONT $PID_borrower
	lenders=""
	for i in $(seq 1 200); do
		lenders=$(dd if=/sys/bus/pci/devices/$NV/config bs=1 skip=12 count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
		[ -n "$last" ] && [ "$lenders" = "$last" ] && break
		sleep 0.1
	done
	dropped=$(grep -c "dropped config writes" $NTBFAB_DIR/log/borrower.log)
	if [ -n "$last" ] && [ "$mine" = "$last" ] && [ "$lenders" = "$last" ] && [ "$dropped" = 0 ]; then
		result cfg-daemon-stopped ok "2987 writes of Cache Line Size on $SHADOW while the borrower's daemon was stopped: the shadow read $mine at once, the lender's $NV has $lenders (the last written) after it resumed, nothing dropped"
	else
		result cfg-daemon-stopped FAIL "last written '$last', the shadow reads '$mine', the lender's $NV has '$lenders', $dropped drop(s) logged: $(grep -E 'dropped|config write' $NTBFAB_DIR/log/borrower.log | tail -n 3)"
	fi
fi

mount -t debugfs none /sys/kernel/debug 2>/dev/null
MEMF=8192 # mem0, the borrower's own device (fdid 0x2000)
M0=$(bar0 ${MEM:-none} 0) M2=$(bar0 ${MEM:-none} 2)

# ---- a refused peer mapping (article 4.4): the attach stands, BAR0 of mem0 is mapped, BAR2 not --
# The manager has 62 of the lender window's 128 slots left after the borrow and the mapping of
# mem0's BAR0; BAR2 needs 64. The answer, the log and lspci name the target and the reason, the
# module has no entry for BAR2 (the driver's dma_map_resource() of it fails, no address is
# handed out), and the manager holds the borrow and the BAR0 mapping only.
if [ -n "$SHADOW" ]; then
	refused=$(echo "$attach_out" | tr -d '\n' | grep -o '"refused": *\[[^]]*\]')
	logged=$(grep -o "0x1000 cannot reach BAR2 of 0x2000 peer-to-peer: the manager refused the mapping: .*" $NTBFAB_DIR/log/borrower.log | head -n 1)
	listed=$(ntbfab lspci --node borrower | grep -o "cannot reach BAR2 of 0x2000 peer-to-peer: .*")
	r0=$(peer_rec $MEMF 0) r2=$(peer_rec $MEMF 2)
	t0=$(peer_table $SHADOW $M0) t2=$(peer_table $SHADOW $M2)
	got0=$(p2p_map $SHADOW $M0) got2=$(p2p_map $SHADOW $((M2 + 4096)))
	nomap=$(dmesg | grep -c "no peer mapping for 0x0*$(printf %x $((M2 + 4096)))")
	a=$(allocs)
	echo "shadowtier: refused: answer [$refused], log [$logged], lspci [$listed], BAR0 daemon [$r0] module [$t0] map $got0, BAR2 daemon [$r2] module [$t2] map $got2 ($nomap kernel refusal), $a"
	case "$(echo "$refused" | tr -s ' ')" in
	*'"target": 8192, "bar": 2, "error": "the manager refused the mapping: '*"no 64 free consecutive slots"*"BAR2 of borrower.mem0"*) ok_answer=1 ;;
	*) ok_answer="" ;;
	esac
	case "$logged" in
	"0x1000 $listed; its driver's dma_map_resource() of that BAR fails, the attach stands") ok_log=1 ;;
	*) ok_log="" ;;
	esac
	if [ -n "$ok_answer" ] && [ -n "$listed" ] && [ -n "$ok_log" ] &&
		[ -n "$r0" ] && [ "$t0" = "$r0" ] && [ "$got0" = "${r0##* }" ] &&
		[ -z "$r2" ] && [ -z "$t2" ] && [ "$got2" = 18446744073709551615 ] && [ "$nomap" -ge 1 ] &&
		[ "$a" = '"allocations":2' ]; then
		result peer-refused ok "attach of 0x1000 stands; BAR0 of mem0 mapped [$r0], BAR2 refused and named in the answer, the log and lspci ('$listed'); no BAR2 entry in the module or the record, its dma_map_resource() fails (all ones, the module's refusal logged); the manager holds $a (the borrow, the BAR0 mapping)"
	else
		result peer-refused FAIL "answer [$refused]; log [$logged]; lspci [$listed]; BAR0 daemon [$r0] module [$t0] map $got0; BAR2 daemon [$r2] module [$t2] map $got2, $nomap kernel refusal(s); $a; $(grep -E 'peer|reach' $NTBFAB_DIR/log/borrower.log | tail -n 5)"
	fi
fi

# ---- peer-to-peer (article 4.4): a second device attached, each reaches the other's BAR0 -----
# Both are the lender's (the same-lender case); the manager resolves each mapping, the daemon
# enters it in the module, and the driver's dma_map_resource() of the other's BAR returns it.
F2=0x1001
if [ -n "$SHADOW" ]; then
	a0=$(allocs) u0=$(budgets)
	# 4 MiB: the first borrow's 16 MiB DMA window leaves 63 of the 32 MiB window's 128 slots
	out=$(ntbfab borrow $F2 --node borrower --attach --dma-window 4MiB --json 2>&1)
	SHADOW2=$(echo "$out" | tr -d ' \n' | sed -n 's/.*"attached":{"pci":"\([^"]*\)".*/\1/p')
	r12=$(peer_rec 4097) r21=$(peer_rec 4096)
	t12=$(peer_table $SHADOW $(bar0 ${SHADOW2:-$SHADOW})) t21=$(peer_table ${SHADOW2:-none} $(bar0 $SHADOW))
	a1=$(allocs)
	echo "shadowtier: peers: daemon [$r12] [$r21], module [$t12] [$t21], allocations $a0 -> $a1"
	if [ -n "$SHADOW2" ] && [ -n "$r12" ] && [ -n "$r21" ] &&
		[ "${r12%% *}" = "$(bar0 $SHADOW2)" ] && [ "${r21%% *}" = "$(bar0 $SHADOW)" ] &&
		[ "$t12" = "$r12" ] && [ "$t21" = "$r21" ] && [ "$a0" != "$a1" ]; then
		result peers-both-ways ok "$SHADOW reaches BAR0 of $SHADOW2 [$r12] and back [$r21] (phys size device address), the module's table as the daemon recorded, manager's $a0 -> $a1"
	else
		result peers-both-ways FAIL "shadow $SHADOW2 ($out); daemon [$r12] [$r21], module [$t12] [$t21], BAR0s $(bar0 $SHADOW) $(bar0 ${SHADOW2:-$SHADOW}); $(grep -E 'peer|reach' $NTBFAB_DIR/log/borrower.log | tail -n 5)"
	fi
	want=${r12##* } phys2=$(bar0 ${SHADOW2:-$SHADOW})
	got=$(p2p_map $SHADOW $((phys2 + 4096)))
	if [ -n "$want" ] && [ "$got" = $((want + 4096)) ]; then
		result peer-dma-map ok "dma_map_resource($SHADOW, BAR0 of $SHADOW2 + 4 KiB) = $got, the manager's device address + 4 KiB"
	else
		result peer-dma-map FAIL "dma_map_resource($SHADOW, $((phys2 + 4096))) = '$got', wanted $want + 4096; $(dmesg | tail -n 5)"
	fi
	out=$(ntbfab borrow $F2 --node borrower --detach --json 2>&1)
	rc=$?
	a2=$(allocs) u2=$(budgets)
	left=$(peer_table $SHADOW $phys2) rec=$(peer_rec 4097)
	got=$(p2p_map $SHADOW $((phys2 + 4096)))
	if [ $rc = 0 ] && [ -z "$left" ] && [ -z "$rec" ] && [ "$a2" = "$a0" ] && [ "$u2" = "$u0" ] &&
		[ "$got" = 18446744073709551615 ]; then
		result peer-detach-releases ok "$SHADOW2 detached: $SHADOW's entry and record are gone, its dma_map_resource() of that BAR fails, the manager's $a1 -> $a2 and budgets [$u2] as before"
	else
		result peer-detach-releases FAIL "rc $rc: $out; module [$left], daemon [$rec], $a0 -> $a1 -> $a2, budgets [$u0] -> [$u2], map '$got'"
	fi
fi

# ---- a filesystem on it: mkfs.ext4, 64 MiB of files, remount, read back -------------------
if [ -n "$DISK" ]; then
	if out=$(/sbin/mke2fs -t ext4 -q -F $DISK 2>&1); then
		result mkfs-ext4 ok "mke2fs -t ext4 on $DISK"
	else
		result mkfs-ext4 FAIL "$out"
	fi
	mount -t ext4 $DISK /mnt && mkdir -p /mnt/data
	read t0 idle </proc/uptime
	for i in $(seq 1 16); do
		shadowtest fill /mnt/data/f$i $i $((4 << 20))
	done
	sync
	read t1 idle </proc/uptime
	umount /mnt
	echo 3 >/proc/sys/vm/drop_caches
	mount -t ext4 $DISK /mnt
	bad=0
	for i in $(seq 1 16); do
		shadowtest check /mnt/data/f$i $i $((4 << 20)) 2>>/tmp/check || bad=$((bad + 1))
	done
	bytes=$(cat /mnt/data/f* | wc -c)
	if [ $bad = 0 ] && [ "$bytes" = $((64 << 20)) ]; then
		result files-64mib ok "16 files of 4 MiB (each its own pattern) written, the filesystem remounted, all $bytes bytes read back as written"
		echo "FIGURE write_64mib_sync_s $(awk "BEGIN {print $t1 - $t0}") s"
	else
		result files-64mib FAIL "$bad of 16 files differ, $bytes bytes: $(head -n 5 /tmp/check)"
	fi
	umount /mnt
	# Beyond the filesystem's last block group: the device is 256 MiB.
	shadowtest dmacheck $DISK $WIN $((200 << 20))
fi

# ---- a daemon that dies leaves no shadow behind; its successor attaches again -------------
if [ -n "$SHADOW" ]; then
	kill -KILL $PID_borrower
	wait $PID_borrower 2>/dev/null
	for i in $(seq 1 50); do [ -d /sys/bus/pci/devices/$SHADOW ] || break; sleep 0.1; done
	if [ -d /sys/bus/pci/devices/$SHADOW ]; then
		result daemon-death-removes FAIL "$SHADOW is still there 5 s after its daemon died"
	else
		result daemon-death-removes ok "SIGKILL of the borrower's daemon surprise-removed $SHADOW ($(dmesg | grep -c 'surprise') surprise removal(s) in the log)"
	fi
	daemon borrower
	if wait_disk $SHADOW; then
		result restart-reattaches ok "the restarted daemon attached 0x1000 again: $SHADOW, driver '$(driver $SHADOW)', $DISK"
	else
		result restart-reattaches FAIL "$(tail -n 5 $NTBFAB_DIR/log/borrower.log)"
	fi
fi

# ---- detach: the driver unbinds, the borrow and its budgets go back -------------------------
out=$(ntbfab borrow $F --node borrower --detach --json 2>&1)
rc=$?
out=$(echo "$out" | tr -d '\n')
sleep 0.2
prog_back "$before_prog"
after=$(budgets) a=$(allocs) left=$(peer_table -) p=$(prog)
borrows=$(ntbfab lspci --node borrower --json | tr -d ' \n' | grep -c '"borrowed":true')
if [ $rc = 0 ] && [ ! -d /sys/bus/pci/devices/${SHADOW:-none} ] && [ "$after" = "$before" ] &&
	[ "$borrows" = 0 ] && [ "$a" = '"allocations":0' ] && [ -z "$left" ] &&
	[ "$p" = "$before_prog" ] && ! dmesg | grep -q -E 'WARNING:|BUG:|Oops|Call Trace'; then
	result detach ok "the shadow device is gone, the borrower holds no borrow, budgets back to [$after], the manager holds nothing ($a), the daemons' programmed entries as before [$p], no peer entry is left in the module"
else
	result detach FAIL "rc $rc: $out; shadow $([ -d /sys/bus/pci/devices/${SHADOW:-none} ] && echo present || echo gone), budgets [$before] -> [$after], borrows $borrows, $a, programmed [$before_prog] -> [$p], module's peers [$left]; $(dmesg | grep -E -A3 'WARNING:|BUG:|Oops|Call Trace' | head -n 20)"
fi

# ---- the refused mapping, possible now: made whole by the next attach, released by its detach ----
# Nothing retried it behind the operator's back (the detach above found nothing of it). An
# attach with a 4 MiB DMA window leaves the lender's window room for mem0's BAR2: the module's
# entry, the daemon's record and the manager's mapping agree, dma_map_resource() returns the
# manager's address, and the detach takes all of it back.
out=$(ntbfab borrow $F --node borrower --attach --dma-window 4MiB --json 2>&1)
SHADOW=$(echo "$out" | tr -d ' \n' | sed -n 's/.*"attached":{"pci":"\([^"]*\)".*/\1/p')
DISK=""
if [ -n "$SHADOW" ]; then
	wait_disk $SHADOW
	r2=$(peer_rec $MEMF 2) t2=$(peer_table $SHADOW $M2) a1=$(allocs) p1=$(prog)
	got2=$(p2p_map $SHADOW $((M2 + 4096)))
	refused=$(echo "$out" | tr -d ' \n' | grep -c '"refused"')
	out=$(ntbfab borrow $F --node borrower --detach --json 2>&1)
	rc=$?
	prog_back "$before_prog"
	after=$(budgets) a2=$(allocs) left=$(peer_table -) p2=$(prog)
fi
if [ -n "$SHADOW" ] && [ -n "$r2" ] && [ "$t2" = "$r2" ] && [ "${r2%% *}" = "$M2" ] &&
	[ "$got2" = $((${r2##* } + 4096)) ] && [ "$refused" = 0 ] && [ "$a1" = '"allocations":3' ] &&
	[ $rc = 0 ] && [ "$after" = "$before" ] && [ "$a2" = '"allocations":0' ] && [ -z "$left" ] &&
	[ "$p2" = "$before_prog" ]; then
	result peer-later-whole ok "with a 4 MiB DMA window BAR2 of mem0 is mapped whole: module and daemon [$r2], dma_map_resource(BAR2 + 4 KiB) = $got2, the manager's $a1 (the borrow, BAR0, BAR2), programmed [$p1]; detached: $a2, budgets [$after] and programmed [$p2] as before"
else
	result peer-later-whole FAIL "shadow ${SHADOW:-none}: BAR2 daemon [$r2] module [$t2] (BAR2 at $M2), map '$got2', refused in answer $refused, $a1; detach rc $rc: $out, $a2, budgets [$before] -> [$after], programmed [$before_prog] -> [$p1] -> [$p2], module's peers [$left]"
fi

# ---- a daemon that dies between the borrow and the attach: its successor returns it ----------
# The borrower's daemon dies right after recording a borrow made for this kernel, before the
# kernel is given it (NTBFAB_CRASH_AT=borrower:attach:1). The manager still holds the borrow;
# the next daemon finds it held by no shadow device and no VM's instance, and returns it.
kill -TERM $PID_borrower
wait $PID_borrower 2>/dev/null
joined=$(grep -c "joined the fabric manager" $NTBFAB_DIR/log/borrower.log)
export NTBFAB_CRASH_AT=borrower:attach:1
daemon borrower
unset NTBFAB_CRASH_AT
for i in $(seq 1 100); do
	[ "$(grep -c "joined the fabric manager" $NTBFAB_DIR/log/borrower.log)" -gt "$joined" ] && break
	sleep 0.1
done
out=$(ntbfab borrow $F --node borrower --attach --json 2>&1 | tr -d '\n')
wait $PID_borrower
died=$?
mid=$(allocs)
joined=$(grep -c "joined the fabric manager" $NTBFAB_DIR/log/borrower.log)
daemon borrower
for i in $(seq 1 100); do
	[ "$(grep -c "joined the fabric manager" $NTBFAB_DIR/log/borrower.log)" -gt "$joined" ] &&
		[ "$(allocs)" = '"allocations":0' ] && break
	sleep 0.1
done
prog_back "$before_prog"
a=$(allocs) after=$(budgets) p=$(prog)
said=$(grep -c "borrowed for this kernel, but its daemon stopped" $NTBFAB_DIR/log/borrower.log)
shadows=$(ls -d /sys/bus/pci/devices/1000[0-9]:* 2>/dev/null | wc -l)
if [ $died = 86 ] && [ "$mid" = '"allocations":1' ] && [ "$a" = '"allocations":0' ] &&
	[ "$after" = "$before" ] && [ "$p" = "$before_prog" ] && [ "$said" = 1 ] && [ "$shadows" = 0 ]; then
	result orphan-returned ok "the borrower's daemon died after recording 0x1000's borrow for this kernel (exit $died, the manager held it: $mid); its successor returned it ('borrowed for this kernel, but its daemon stopped ...'): $a, budgets [$after] and programmed [$p] as before, no shadow device"
else
	result orphan-returned FAIL "exit $died ($out), manager $mid then $a, budgets [$before] -> [$after], programmed [$before_prog] -> [$p], said $said, shadows $shadows; $(tail -n 5 $NTBFAB_DIR/log/borrower.log)"
fi

# ---- the lender dies: its exports go with its device file, the shadow is surprise-removed ----
out=$(ntbfab borrow $F --node borrower --attach --json 2>&1)
SHADOW=$(echo "$out" | tr -d ' \n' | sed -n 's/.*"attached":{"pci":"\([^"]*\)".*/\1/p')
DISK=""
if [ -n "$SHADOW" ] && wait_disk $SHADOW; then
	removals=$(dmesg | grep -c 'surprise')
	kill -KILL $PID_lender
	wait $PID_lender 2>/dev/null
	for i in $(seq 1 50); do [ -d /sys/bus/pci/devices/$SHADOW ] || break; sleep 0.1; done
	for i in $(seq 1 50); do
		grep -q "shadow of 0x1000 was removed by the kernel" $NTBFAB_DIR/log/borrower.log && break
		sleep 0.1
	done
	if [ ! -d /sys/bus/pci/devices/$SHADOW ] && [ "$(dmesg | grep -c 'surprise')" -gt "$removals" ] &&
		grep -q "shadow of 0x1000 was removed by the kernel" $NTBFAB_DIR/log/borrower.log; then
		result lender-death-removes ok "SIGKILL of the lender's daemon withdrew its export: $SHADOW surprise-removed under nvme, the borrower's daemon told ($(grep -c 'removed by the kernel' $NTBFAB_DIR/log/borrower.log) record)"
	else
		result lender-death-removes FAIL "$SHADOW $([ -d /sys/bus/pci/devices/$SHADOW ] && echo present || echo gone); $(dmesg | tail -n 10)"
	fi
else
	result lender-death-removes FAIL "no shadow disk to start from: $out"
fi

# ---- the backends' BAR host_map (backends/hostmem.c) on this kernel's sysfs: mem0's BAR2 ----
shadowtest barmap ${MEM:-none} 2 /etc/ntbfab/mem0.ref $(cat /etc/ntbfab/mem0.offs)

kill -TERM $PID_borrower $PID_lender 2>/dev/null
wait
echo "shadowtier: kernel log:"
dmesg | grep -E 'ntbfab|nvme|DMAR|export|shadow|vfio|10000:' | tail -n 60
echo "shadowtier: borrower's log:"
grep -E "config write|attach|detach" $NTBFAB_DIR/log/borrower.log | head -n 80
echo "shadowtier: lender's log:"
tail -n 40 $NTBFAB_DIR/log/lender.log
echo "SHADOWTIER DONE guest"
poweroff -f
