#!/bin/busybox sh
# tests/mdev/l2init.sh: /init of the nested guest (L2) of the mdev test (docs/kernel.md, "The
# kernel tier"). Its only NVMe is the ntbfab mdev instance that L1's QEMU gave it with
# -device vfio-pci,sysfsdev=...; Debian's unchanged nvme driver binds to it. Its console is
# a file in L1, whose RESULT lines L1 copies to its own log; its second serial port (ttyS1) is
# a pipe on which L1 says when it killed and restarted the borrower's daemon.
# mdevtier.phase=first (the first VM: write and verify, I/O through the daemon's death, the
# pattern /pattern left on the device at 32 MiB) or migrated (the VM started again with a new
# instance of the same device: the pattern read back, and it stops while L1 has no borrower's
# daemon).
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp
mount -t tmpfs tmpfs /tmp
result() { echo "RESULT $1 $2 $3"; }
read up idle </proc/uptime
PHASE=$(sed -n 's/.*mdevtier\.phase=\([a-z]*\).*/\1/p' /proc/cmdline)
if [ "$PHASE" = migrated ]; then
	echo "FIGURE l2m_boot_to_init_s $up s"
else
	echo "FIGURE l2_boot_to_init_s $up s"
fi
NV=""
for d in /sys/bus/pci/devices/*; do
	[ "$(cat $d/class)" = 0x010802 ] && NV=$(basename $d)
done
for m in $(cat /lib/modules/order); do
	insmod /lib/modules/$m.ko || echo "L2: insmod $m failed"
done
DISK=""
for i in $(seq 1 600); do
	[ -b /dev/nvme0n1 ] && DISK=/dev/nvme0n1 && break
	sleep 0.1
done
drv=$(basename "$(readlink /sys/bus/pci/devices/$NV/driver 2>/dev/null)" 2>/dev/null)
MIG=32 # MiB: where the first VM leaves /pattern (4 MiB) for the migrated one
if [ "$PHASE" = migrated ]; then
	# Cold migration: this VM got a new instance of the device; what the first VM wrote is
	# on the device, byte for byte.
	exec 4</dev/ttyS1 # open before L1 can write: the UART drops what came before
	if [ -z "$DISK" ] || [ "$drv" != nvme ]; then
		result migrated-reads-pattern FAIL "no nvme disk: device ${NV:-none}, driver '${drv:-none}'; $(dmesg | grep -i nvme | tail -n 5 | tr '\n' ' ')"
	elif diff=$(dd if=$DISK bs=1M skip=$MIG count=4 iflag=direct 2>/dev/null | cmp - /pattern 2>&1); then
		result migrated-reads-pattern ok "Debian's nvme driver bound $NV ($DISK, serial '$(sed 's/ *$//' /sys/class/nvme/nvme0/serial)'); the 4 MiB the first VM left at $MIG MiB read back with O_DIRECT equal /pattern byte for byte (md5 $(md5sum </pattern | cut -d' ' -f1))"
	else
		result migrated-reads-pattern FAIL "the 4 MiB at $MIG MiB differ from /pattern: ${diff:-short read}"
	fi
	# This VM stops while no daemon runs: L1 kills it first and says "dead".
	echo "L2 READ-DONE"
	read -r msg <&4
	echo "L2 DONE"
	poweroff -f
fi
if [ -n "$DISK" ] && [ "$drv" = nvme ]; then
	model=$(cat /sys/class/nvme/nvme0/model 2>/dev/null | sed 's/ *$//')
	serial=$(cat /sys/class/nvme/nvme0/serial 2>/dev/null | sed 's/ *$//')
	result l2-nvme-identifies ok "Debian's nvme driver bound $NV ($(cat /sys/bus/pci/devices/$NV/vendor):$(cat /sys/bus/pci/devices/$NV/device)) and identified it: model '$model', serial '$serial', $DISK"
else
	result l2-nvme-identifies FAIL "no nvme disk: device ${NV:-none}, driver '${drv:-none}'; $(dmesg | grep -i nvme | tail -n 5 | tr '\n' ' ')"
fi
if [ -n "$DISK" ]; then
	# 16 MiB of random bytes out and back, past the page cache both ways.
	dd if=/dev/urandom of=/tmp/pattern bs=1M count=16 2>/dev/null
	want=$(md5sum </tmp/pattern | cut -d' ' -f1)
	dd if=/tmp/pattern of=$DISK bs=1M count=16 oflag=direct 2>/tmp/dd.err ||
		dd if=/tmp/pattern of=$DISK bs=1M count=16 conv=fsync 2>/tmp/dd.err
	sync
	echo 3 >/proc/sys/vm/drop_caches
	got=$(dd if=$DISK bs=1M count=16 iflag=direct 2>/dev/null | md5sum | cut -d' ' -f1)
	[ -n "$got" ] && [ "$got" != d41d8cd98f00b204e9800998ecf8427e ] ||
		got=$(dd if=$DISK bs=1M count=16 2>/dev/null | md5sum | cut -d' ' -f1)
	if [ "$got" = "$want" ]; then
		result l2-write-verify ok "16 MiB written to $DISK and read back from the device: md5 $got"
	else
		result l2-write-verify FAIL "md5 written $want, read back ${got:-nothing}; $(cat /tmp/dd.err | tail -n 2 | tr '\n' ' ')"
	fi
	# Completions arrived as interrupts (relayed through eventfds), not by polling.
	irqs=$(grep nvme /proc/interrupts | awk '{ s = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; t += s } END { print t + 0 }')
	polled=$(dmesg | grep -c "completion polled")
	if [ "$irqs" -gt 0 ] && [ "$polled" = 0 ]; then
		result l2-interrupts ok "$irqs nvme interrupts in L2, no completion polled after a timeout"
	else
		result l2-interrupts FAIL "$irqs nvme interrupts, $polled completions polled after timeouts"
	fi
fi

# ---- I/O through the death of the borrower's daemon -------------------------------------
# A loop of verified rounds while L1 kills the daemon (SIGKILL) and starts it again: each round
# writes /tmp/other (the pattern rotated by 2 MiB: different bytes) and reads it back, then
# /pattern, with O_DIRECT, and compares byte for byte (a new dd each time: a read that does not
# arrive leaves zeros, not the last round's bytes). It stops after a whole round, so /pattern
# is what the device holds when this VM powers off.
until_rounds() { # N: wait for N finished rounds (or a failed one, or the loop's end)
	for i in $(seq 1 6000); do
		[ "$(cat /tmp/rounds)" -ge "$1" ] && return 0
		[ -s /tmp/bad ] || [ ! -e /tmp/looping ] && return 1
		sleep 0.1
	done
	return 1
}
if [ -n "$DISK" ]; then
	dd if=/pattern bs=1M skip=2 count=2 of=/tmp/other 2>/dev/null
	dd if=/pattern bs=1M count=2 2>/dev/null >>/tmp/other
	exec 4</dev/ttyS1 # open before L1 can write: the UART drops what came before
	echo 0 >/tmp/rounds
	: >/tmp/bad
	touch /tmp/looping
	(
		n=0
		while [ ! -e /tmp/stop ]; do
			for f in /tmp/other /pattern; do
				dd if=$f of=$DISK bs=1M seek=$MIG count=4 oflag=direct 2>/dev/null &&
					out=$(dd if=$DISK bs=1M skip=$MIG count=4 iflag=direct 2>/dev/null | cmp - $f 2>&1) ||
					{ echo "round $((n + 1)), $f: ${out:-write or read failed}" >/tmp/bad; break 2; }
			done
			n=$((n + 1))
			echo $n >/tmp/rounds
		done
		rm /tmp/looping
	) &
	LOOP=$!
	until_rounds 1 && echo "L2 IO-RUNNING" || echo "L2 IO-FAILED"
	read -r msg <&4 # "dead": the borrower's daemon was killed
	n0=$(cat /tmp/rounds)
	# n0 + 1 may have begun before the kill: n0 + 2 ran wholly while no daemon was there.
	until_rounds $((n0 + 2)) && dead=ok || dead=FAIL
	echo "L2 IO-DURING-DEATH $dead"
	read -r msg <&4 # "back": a new daemon took the instance over
	n1=$(cat /tmp/rounds)
	until_rounds $((n1 + 1)) && back=ok || back=FAIL
	touch /tmp/stop
	wait $LOOP
	n2=$(cat /tmp/rounds)
	if [ "$dead" = ok ] && [ "$back" = ok ] && [ ! -s /tmp/bad ]; then
		result l2-io-through-daemon-death ok "$n2 verified rounds of 2 x 4 MiB out and back: $((n1 - n0)) after the daemon was killed, before its restart; $((n2 - n1)) after it; none failed"
	else
		result l2-io-through-daemon-death FAIL "rounds: $n0 before the kill, $n1 before the restart, $n2 in all (during the death: $dead, after: $back); $(cat /tmp/bad); $(dmesg | grep -i nvme | tail -n 3 | tr '\n' ' ')"
	fi
fi
echo "L2 DONE"
poweroff -f
