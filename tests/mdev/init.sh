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
# A lease of 60 s instead of the shadow test's 10 s: the borrower's daemon is killed and started
# again below while a VM runs, and under load that can take longer than 10 s in this guest.
sed "s/@NVME@/$NV/; s/@CTL@/$CTL/g; s/lease: 10s/lease: 60s/" /etc/ntbfab/loopback.yaml \
	>$NTBFAB_DIR/cluster.yaml
grep -q "lease: 60s" $NTBFAB_DIR/cluster.yaml || echo "mdevtier: the cluster's lease is not 60 s"
cp /etc/ntbfab/cluster.key $NTBFAB_DIR/cluster.key
F=0x1000
U=6e7466ab-0000-4000-8000-00000000a001
daemon() {
	rm -f $NTBFAB_DIR/log/$1.log
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
state() { cat /sys/bus/mdev/devices/${1:-$U}/ntbfab/state 2>/dev/null || echo none; }
# The borrows the fabric manager (the lender's daemon) records for the borrower.
fm_borrows() { ntbfab status --json | tr -d ' \n' | grep -o '"borrower":"borrower"' | wc -l; }
instance() { ntbfab mdev --node borrower list --json | tr -d ' \n' | grep -o '"instance":[0-9]*' | head -n 1 | cut -d: -f2; }

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
# l2_start UUID PHASE: L2 with the instance, paused at start (-S): the VMM has opened the
# instance and mapped the guest's RAM, the guest has not run. Its monitor reads a FIFO in L1's
# /dev (the only writable place in the chroot), on fd 3; its console is the file $CON; its
# second serial port is a pipe (QEMU's PATH.in and PATH.out) on which L1 talks to it.
l2_start() {
	CON=/dev/l2console-$2
	rm -f /dev/l2mon /dev/l2ctl.in /dev/l2ctl.out $CON
	mkfifo /dev/l2mon /dev/l2ctl.in
	: >/dev/l2ctl.out
	chroot /host /usr/bin/qemu-system-x86_64 -accel $ACC -machine q35 -cpu max -m 128M -smp 1 \
		-nodefaults -no-reboot -display none -S -monitor stdio -serial file:$CON \
		-serial pipe:/dev/l2ctl -kernel $L2K -initrd $L2I \
		-device vfio-pci,sysfsdev=/sys/bus/mdev/devices/$1 \
		-append "console=ttyS0 panic=-1 quiet loglevel=4 no_timer_check mdevtier.phase=$2" \
		</dev/l2mon >/tmp/l2mon 2>&1 &
	QPID=$!
	exec 3>/dev/l2mon
	exec 5<>/dev/l2ctl.in # read-write: never blocks, also once L2's QEMU has gone
	read T0 idle </proc/uptime
	for i in $(seq 1 1200); do
		[ "$(state $1)" = open ] && break
		kill -0 $QPID 2>/dev/null || break
		sleep 0.1
	done
}
# l2_borrowed UUID: once L2 runs, its nvme driver enables bus mastering and the borrow happens.
l2_borrowed() {
	SEEN=""
	for i in $(seq 1 3000); do
		if [ "$(state $1)" = borrowed ] && [ "$(borrows)" = 1 ]; then
			SEEN="state borrowed, the borrower holds 1 borrow, budgets [$(budgets)]"
			return 0
		fi
		kill -0 $QPID 2>/dev/null || break
		sleep 0.1
	done
	return 1
}
# l2_says PREFIX: wait for a line of L2's console that starts with PREFIX (1: L2 is gone).
l2_says() {
	for i in $(seq 1 6000); do
		grep -q "^$1" $CON 2>/dev/null && return 0
		kill -0 $QPID 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# l2_end FIGURE: L2 powers off when it is done; its QEMU closes the instance.
l2_end() {
	for i in $(seq 1 6000); do
		kill -0 $QPID 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 $QPID 2>/dev/null; then
		echo quit >&3
		sleep 1
	fi
	exec 3>&- 5>&-
	wait $QPID
	read t1 idle </proc/uptime
	echo "FIGURE $1 $(awk "BEGIN {print $t1 - $T0}") s"
	tr -d '\r' <$CON | grep -E '^(RESULT|FIGURE|L2 )'
	grep -q "^L2 DONE" $CON || { echo "mdevtier: L2's console:"; tail -n 40 $CON; }
}
# returned ROW UUID MESSAGE [LOG [COUNT]]: the borrow is back, and the daemon's LOG (the
# borrower's, by default) says MESSAGE (COUNT times, when given).
returned() {
	for i in $(seq 1 50); do [ "$(borrows)" = 0 ] && break; sleep 0.1; done
	local after=$(budgets) n=$(borrows) st=$(state $2) fm=$(fm_borrows)
	local log=${4:-$NTBFAB_DIR/log/borrower.log} said
	said=$(grep -c "$3" $log)
	if [ "$n" = 0 ] && [ "$fm" = 0 ] && [ "$after" = "$before" ] && [ "$st" = idle ] &&
		[ "$said" -ge 1 ] && { [ -z "$5" ] || [ "$said" = "$5" ]; }; then
		result $1 ok "L2 powered off: instance $st, no borrow at the borrower or the manager, budgets back to [$after]; the daemon: $(grep -o "$3.*" $log | tail -n 1)"
	else
		result $1 FAIL "state $st, $n borrow(s) at the borrower, $fm at the manager, budgets [$before] -> [$after], '$3' $said time(s) in $(basename $log)"
	fi
}

l2_start $U first
st=$(state) n=$(borrows) during0=$(budgets)
if [ "$st" = open ] && [ "$n" = 0 ] && [ "$during0" = "$before" ]; then
	result no-borrow-before-enable ok "L2's QEMU opened the instance (state $st), the guest has not run: no borrow, budgets [$during0]"
else
	result no-borrow-before-enable FAIL "state $st, $n borrow(s), budgets [$before] -> [$during0]; $(cat /tmp/l2mon | tail -n 5)"
fi
echo cont >&3
if l2_borrowed $U; then
	result borrow-while-running ok "$SEEN"
else
	result borrow-while-running FAIL "state $(state), $(borrows) borrow(s)"
fi
during=$(budgets)

# ---- the borrower's daemon dies while L2 does I/O, and a new one takes the instance over ----
# L2 runs verified rounds of I/O (l2init.sh) and says "L2 IO-RUNNING"; SIGKILL of the
# borrower's daemon; L2 is told "dead" and finishes a round begun after it; a new daemon starts
# and L2 is told "back". The instance keeps the device throughout (the data path has no daemon
# in it), the manager keeps the borrow, and the new daemon finds the instance in its record.
if l2_says "L2 IO-"; then
	inst=$(instance)
	kill -KILL $PID_borrower
	wait $PID_borrower 2>/dev/null
	st=$(state) fm=$(fm_borrows) dead=$(budgets)
	up=$(ntbfab status --json | tr -d ' \n' | grep -o '"node":"borrower","id":2,"up":[a-z]*')
	echo dead >&5
	l2_says "L2 IO-DURING-DEATH"
	st2=$(state)
	if [ "$st" = borrowed ] && [ "$st2" = borrowed ] && [ "$fm" = 1 ] &&
		[ "$dead" = "$during" ] && [ "${up##*:}" = false ]; then
		result daemon-death-keeps-vm ok "SIGKILL of the borrower's daemon while L2's I/O ran: the manager sees it down and keeps its borrow ($fm), budgets [$dead], instance $inst stays $st2 while L2 finishes a round without it"
	else
		result daemon-death-keeps-vm FAIL "instance $inst: state $st then $st2, the manager: ${up:-no status}, $fm borrow(s), budgets [$during] -> [$dead]"
	fi
	mv $NTBFAB_DIR/log/borrower.log $NTBFAB_DIR/log/borrower-killed.log
	daemon borrower
	rec=$(ntbfab lspci --node borrower --json | tr -d ' \n' | grep -o '"mdev":{[^}]*}')
	st=$(state) n=$(borrows)
	if [ -n "$inst" ] && [ "$st" = borrowed ] && [ "$n" = 1 ] &&
		grep -q "taken over from its borrow record" $NTBFAB_DIR/log/borrower.log &&
		echo "$rec" | grep -q "\"instance\":$inst[,}]"; then
		result daemon-restart-takes-over ok "the new daemon took instance $inst over from the borrow record ($rec in ntbfab lspci --json); state $st, $n borrow"
	else
		result daemon-restart-takes-over FAIL "instance '$inst': record '${rec:-no mdev in ntbfab lspci --json}', state $st, $n borrow(s); $(grep -E 'VM|mdev|instance' $NTBFAB_DIR/log/borrower.log | tail -n 5)"
	fi
	echo back >&5
fi
l2_end l2_vm_wall_s
returned returned-after-poweroff $U "returning 0x1000 of a VM"

# ---- the operator removes the instance -----------------------------------------------------
out=$(ntbfab mdev --node borrower remove $U 2>&1)
if [ $? = 0 ] && [ ! -e /sys/bus/mdev/devices/$U ]; then
	result mdev-remove ok "$out"
else
	result mdev-remove FAIL "$out"
fi

# ---- cold migration: the VM starts again with a new instance of the same device -------------
# As an operator does on the destination host: 'ntbfab mdev create' there, the VM started with
# it. Here the destination is this same kernel (loopback lending, docs/kernel.md).
if grep -q "^FIGURE l2_boot_to_init_s" /dev/l2console-first; then
	U2=6e7466ab-0000-4000-8000-00000000a002
	out=$(ntbfab mdev --node borrower create $F --uuid $U2 2>&1)
	if [ $? = 0 ] && [ "$(state $U2)" = idle ] && [ "$(borrows)" = 0 ] && [ "$(fm_borrows)" = 0 ]; then
		result migrate-new-instance ok "$(echo "$out" | head -n 1); nothing borrowed"
	else
		result migrate-new-instance FAIL "$(echo "$out" | tr '\n' ' '); state $(state $U2), $(borrows) borrow(s), $(fm_borrows) at the manager"
	fi
	l2_start $U2 migrated
	echo cont >&3
	if l2_borrowed $U2; then
		result migrated-borrow-while-running ok "the migrated VM's instance: $SEEN"
	else
		result migrated-borrow-while-running FAIL "state $(state $U2), $(borrows) borrow(s)"
	fi
	# The borrower's daemon dies again, and this VM stops while none runs: its QEMU closes the
	# instance, which gives the device up and can tell nobody. The next daemon finds the
	# instance without the device and returns the borrow its record holds.
	l2_says "L2 READ-DONE"
	# An L2 that died before its /init (mdevtier.py then runs the tier again) stopped while
	# the daemon ran, and that daemon returned its borrow itself.
	gone=""
	kill -0 $QPID 2>/dev/null || gone=1
	kill -KILL $PID_borrower
	wait $PID_borrower 2>/dev/null
	echo dead >&5
	l2_end l2m_vm_wall_s
	st=$(state $U2) fm=$(fm_borrows)
	mv $NTBFAB_DIR/log/borrower.log $NTBFAB_DIR/log/borrower-killed2.log
	daemon borrower
	if [ "$st" = idle ] && [ "$fm" = 1 ]; then
		result vm-stops-without-daemon ok "the migrated VM stopped with no borrower's daemon: instance $st, the manager still held the borrow ($fm) until a new daemon came"
	else
		result vm-stops-without-daemon FAIL "with no daemon: instance $st, $fm borrow(s) at the manager"
	fi
	if [ -n "$gone" ]; then
		# The first L2's return, then this one's, in the killed daemon's log.
		returned migrated-returned $U2 "returning 0x1000 of a VM" \
			$NTBFAB_DIR/log/borrower-killed2.log 2
	else
		returned migrated-returned $U2 "no longer has it"
	fi
	ntbfab mdev --node borrower remove $U2 >/dev/null 2>&1 ||
		result migrated-remove FAIL "$U2 could not be removed"
else
	echo "mdevtier: the first L2 never reached its /init: no migration in this run"
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
for f in borrower-killed borrower-killed2 borrower; do
	[ -e $NTBFAB_DIR/log/$f.log ] || continue
	echo "mdevtier: $f's log:"
	grep -E "mdev|VM|borrow|return|config write|joined" $NTBFAB_DIR/log/$f.log | head -n 60
done
echo "mdevtier: lender's log:"
tail -n 30 $NTBFAB_DIR/log/lender.log
echo "MDEVTIER DONE"
poweroff -f
