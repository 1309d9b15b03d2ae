#!/bin/busybox sh
# tests/mdev/init.sh: /init of L1, the host of the mdev test (docs/kernel.md, "The kernel
# tier"). Loopback lending as in the shadow test (tests/shadow/loopback.yaml: two daemons of
# this one kernel, QEMU's NVMe lent through vfio-pci, DMA through the ivshmem window onto this
# guest's own RAM), but the borrower gives the device to a nested VM (L2, KVM on TCG's SVM)
# as an ntbfab_mdev instance. L2 runs the host's own QEMU from a read-only virtfs share of the
# host's / (chroot). Results go to the console as RESULT and FIGURE lines.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /run /tmp /host
mount -t tmpfs tmpfs /run
if grep -q "mdevtier.mode=probe" /proc/cmdline; then
	# the accelerator probe (guestkit.accelerator): reaching /init is all it asks
	echo "VMTIER PROBE OK"
	poweroff -f
fi
read up idle </proc/uptime
echo "FIGURE boot_to_init_s $up s"
result() { echo "RESULT $1 $2 $3"; }
driver() { basename "$(readlink /sys/bus/pci/devices/$1/driver 2>/dev/null)" 2>/dev/null; }
bar2_size() { set -- $(sed -n 3p /sys/bus/pci/devices/$1/resource); echo $(($2 - $1 + 1)); }
arg() { sed -n "s/.*mdevtier\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }

NV="" CTL="" WIN=""
for d in /sys/bus/pci/devices/*; do
	b=$(basename $d)
	[ "$(cat $d/class)" = 0x010802 ] && NV=$b
	if [ "$(cat $d/vendor)" = 0x1af4 ] && [ "$(cat $d/device)" = 0x1110 ]; then
		[ "$(bar2_size $b)" -ge $((512 << 20)) ] && WIN=$b || CTL=$b
	fi
done
echo "mdevtier: NVMe ${NV:-none}, control region ${CTL:-none}, RAM window ${WIN:-none}"
for m in $(cat /lib/modules/order); do
	case $m in
	ntbfab_shadow) args="loopback_window=$WIN" ;;
	*) args="" ;;
	esac
	insmod /lib/modules/$m.ko $args || echo "mdevtier: insmod $m failed"
done
ifconfig lo 127.0.0.1 up

export NTBFAB_DIR=/run/ntbfab
mkdir -p $NTBFAB_DIR
sed "s/@NVME@/$NV/; s/@CTL@/$CTL/g" /etc/ntbfab/loopback.yaml >$NTBFAB_DIR/cluster.yaml
cp /etc/ntbfab/cluster.key $NTBFAB_DIR/cluster.key
F=0x1000
U=6e7466ab-0000-4000-8000-00000000a001
daemon() {
	ntbfabd --config $NTBFAB_DIR/cluster.yaml --node $1 --dir $NTBFAB_DIR --quiet --log-level debug &
	eval PID_$1=$!
	for i in $(seq 1 300); do
		grep -q "joined the fabric manager" $NTBFAB_DIR/log/$1.log 2>/dev/null && return 0
		sleep 0.1
	done
	echo "mdevtier: $1's daemon did not join the fabric manager"
	return 1
}
budgets() { ntbfab status --json | tr -d ' \n' | grep -o '"used":[0-9]*' | tr '\n' ' '; }
# The borrower's borrows, as its daemon records them.
borrows() { ntbfab lspci --node borrower --json | tr -d ' \n' | grep -o '"borrowed":true' | wc -l; }
state() { cat /sys/bus/mdev/devices/$U/ntbfab/state 2>/dev/null || echo none; }

daemon lender && daemon borrower
out=$(ntbfab lend --force lender $NV 2>&1)
[ "$(driver $NV)" = vfio-pci ] || echo "mdevtier: lend failed: $out"
before=$(budgets)

# ---- the operator creates an instance: nothing is borrowed -------------------------------
out=$(ntbfab mdev --node borrower create $F --uuid $U 2>&1)
rc=$?
if [ $rc = 0 ] && [ -d /sys/bus/mdev/devices/$U ] && [ "$(state)" = idle ] && [ "$(borrows)" = 0 ]; then
	result mdev-create ok "$(echo "$out" | head -n 1); type $(basename $(readlink /sys/bus/mdev/devices/$U/mdev_type)), no borrow"
else
	result mdev-create FAIL "rc $rc: $out; state $(state), borrows $(borrows); $(dmesg | tail -n 10)"
fi
list=$(ntbfab mdev --node borrower list 2>&1)
case "$list" in
*"$U 0x1000 idle /sys/bus/mdev/devices/$U"*) result mdev-list ok "$list" ;;
*) result mdev-list FAIL "$list" ;;
esac
out=$(ntbfab mdev --node borrower create 0x7777 2>&1)
case "$?:$out" in
1:*"not in the pool"*) result mdev-create-refused ok "$out" ;;
*) result mdev-create-refused FAIL "$out" ;;
esac

# ---- L2: the host's QEMU through a read-only share of the host's / -------------------------
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288 host /host ||
	echo "mdevtier: the 9p mount of the host failed"
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
L2K=$(arg l2kernel) L2I=$(arg l2initrd)
[ -c /dev/kvm ] && ACC=kvm || ACC=tcg
echo "mdevtier: L2 under $ACC ($(grep -o -w -m1 svm /proc/cpuinfo || echo no svm))"
# Paused at start (-S): the VMM has opened the instance and mapped the guest's RAM, the guest
# has not run. Its monitor reads a FIFO in L1's /dev (the only writable place in the chroot).
mkfifo /dev/l2mon
chroot /host /usr/bin/qemu-system-x86_64 -accel $ACC -machine q35 -cpu max -m 128M -smp 1 \
	-nodefaults -no-reboot -display none -S -monitor stdio -serial file:/dev/l2console \
	-kernel $L2K -initrd $L2I -device vfio-pci,sysfsdev=/sys/bus/mdev/devices/$U \
	-append "console=ttyS0 panic=-1 quiet loglevel=4 no_timer_check" </dev/l2mon >/tmp/l2mon 2>&1 &
QPID=$!
exec 3>/dev/l2mon
read t0 idle </proc/uptime
for i in $(seq 1 1200); do
	[ "$(state)" = open ] && break
	kill -0 $QPID 2>/dev/null || break
	sleep 0.1
done
st=$(state) n=$(borrows) during0=$(budgets)
if [ "$st" = open ] && [ "$n" = 0 ] && [ "$during0" = "$before" ]; then
	result no-borrow-before-enable ok "L2's QEMU opened the instance (state $st), the guest has not run: no borrow, budgets [$during0]"
else
	result no-borrow-before-enable FAIL "state $st, $n borrow(s), budgets [$before] -> [$during0]; $(cat /tmp/l2mon | tail -n 5)"
fi
echo cont >&3
# While L2 runs: its nvme driver enables bus mastering, and the borrow happens.
seen=""
for i in $(seq 1 3000); do
	if [ "$(state)" = borrowed ] && [ "$(borrows)" = 1 ]; then
		seen="state borrowed, the borrower holds 1 borrow, budgets [$(budgets)]"
		break
	fi
	kill -0 $QPID 2>/dev/null || break
	sleep 0.1
done
if [ -n "$seen" ]; then
	result borrow-while-running ok "$seen"
else
	result borrow-while-running FAIL "state $(state), $(borrows) borrow(s)"
fi
# L2 powers off when it is done; its QEMU closes the instance: the device goes back.
for i in $(seq 1 6000); do
	kill -0 $QPID 2>/dev/null || break
	sleep 0.1
done
if kill -0 $QPID 2>/dev/null; then
	echo quit >&3
	sleep 1
fi
exec 3>&-
wait $QPID
read t1 idle </proc/uptime
echo "FIGURE l2_vm_wall_s $(awk "BEGIN {print $t1 - $t0}") s"
cat /dev/l2console | tr -d '\r' | grep -E '^(RESULT|FIGURE|L2 )'
grep -q "^L2 DONE" /dev/l2console || { echo "mdevtier: L2's console:"; tail -n 40 /dev/l2console; }
for i in $(seq 1 50); do [ "$(borrows)" = 0 ] && break; sleep 0.1; done
after=$(budgets) n=$(borrows) st=$(state)
if [ "$n" = 0 ] && [ "$after" = "$before" ] && [ "$st" = idle ] &&
	grep -q "returning 0x1000 of a VM" $NTBFAB_DIR/log/borrower.log; then
	result returned-after-poweroff ok "L2 powered off: instance $st, no borrow, budgets back to [$after]"
else
	result returned-after-poweroff FAIL "state $st, $n borrow(s), budgets [$before] -> [$after]"
fi

# ---- the operator removes the instance -----------------------------------------------------
out=$(ntbfab mdev --node borrower remove $U 2>&1)
if [ $? = 0 ] && [ ! -e /sys/bus/mdev/devices/$U ]; then
	result mdev-remove ok "$out"
else
	result mdev-remove FAIL "$out"
fi
if dmesg | grep -q -E 'WARNING:|BUG:|Oops|Call Trace'; then
	result kernel-clean FAIL "$(dmesg | grep -E -A5 'WARNING:|BUG:|Oops|Call Trace' | head -n 30)"
else
	result kernel-clean ok "no warning, bug or oops in L1's kernel log"
fi

kill -TERM $PID_borrower $PID_lender
wait
echo "mdevtier: kernel log:"
dmesg | grep -E 'ntbfab|nvme|DMAR|vfio|mdev|kvm' | tail -n 60
echo "mdevtier: borrower's log:"
grep -E "mdev|VM|borrow|return|config write" $NTBFAB_DIR/log/borrower.log | head -n 80
echo "mdevtier: lender's log:"
tail -n 30 $NTBFAB_DIR/log/lender.log
echo "MDEVTIER DONE"
poweroff -f
