#!/bin/busybox sh
# tests/mdev/l2init.sh: /init of the nested guest (L2) of the mdev test (docs/kernel.md, "The
# kernel tier"). Its only NVMe is the ntbfab mdev instance that L1's QEMU gave it with
# -device vfio-pci,sysfsdev=...; Debian's unchanged nvme driver binds to it. Its console is
# L1's QEMU's stdio, so its RESULT lines land in L1's log.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp
mount -t tmpfs tmpfs /tmp
result() { echo "RESULT $1 $2 $3"; }
read up idle </proc/uptime
echo "FIGURE l2_boot_to_init_s $up s"
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
echo "L2 DONE"
poweroff -f
