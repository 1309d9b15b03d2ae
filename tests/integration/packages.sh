#!/bin/sh
# tests/integration/packages.sh BUILD SRC: the Debian packages, installed in a clean root.
#
# Builds the packages from a copy of the source tree with `dpkg-buildpackage -b -us -uc`,
# then installs them with apt (which must resolve every dependency they declare from
# Debian's archive) into a fresh copy of a minimal Debian 12 root (debootstrap
# --variant=minbase, made once and kept in the cache: NTBFAB_CACHE, else ~/.cache/ntbfab, so
# that a fresh build directory does not fetch it again).
# In that root, as an operator would: `ntbfab validate` on the installed example, `ntbfab
# up` of a simulated cluster with the installed daemon, a SISCI example compiled there with
# `cc $(pkg-config --cflags --libs sisci)` against the -dev packages and run between two
# nodes, the man pages and the units where they belong. Needs root, debootstrap and Debian's
# archive; exit 77 (skipped) without them.
set -u
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
cache=${NTBFAB_CACHE:-${HOME:+$HOME/.cache/ntbfab}}
cache=${cache:-$build/pkg-cache}
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
skip() {
	echo "SKIP: $*"
	exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (chroot)"
for t in dpkg-buildpackage debootstrap unshare; do
	command -v $t >/dev/null || skip "no $t"
done
tmp=$(mktemp -d /tmp/ntbfab-pkg-XXXXXX)
root=$tmp/root
cleanup() {
	[ -n "${NTBFAB_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- the packages -------------------------------------------------------------------------
echo "building the packages (dpkg-buildpackage -b -us -uc)"
mkdir "$tmp/ntbfab"
(cd "$src" && tar --exclude='./build*' --exclude=./.git --exclude='./bench/results' -cf - .) |
	(cd "$tmp/ntbfab" && tar -xf -)
(cd "$tmp/ntbfab" && DEB_BUILD_OPTIONS="parallel=2 nocheck noddebs" nice dpkg-buildpackage -b -us -uc) >"$tmp/build.log" 2>&1 ||
	fail "dpkg-buildpackage: $(tail -25 "$tmp/build.log")"
for p in ntbfab libntbfab0 libntbfab-dev libsisci0 libsisci-dev ntbfab-dkms; do
	ls "$tmp"/${p}_*.deb >/dev/null 2>&1 || fail "no package $p was built"
done
dpkg-deb -c "$tmp"/libntbfab0_*.deb >"$tmp/list"
grep -q 'libntbfab\.so\.0\.' "$tmp/list" || fail "libntbfab0 holds no versioned libntbfab.so"
if [ -f "$src/kernel/dkms.conf" ]; then
	dpkg-deb -c "$tmp"/ntbfab-dkms_*.deb >"$tmp/list"
	grep -q '/usr/src/.*/dkms.conf' "$tmp/list" ||
		fail "ntbfab-dkms holds no dkms.conf although kernel/ has one"
fi

# ---- a clean root ---------------------------------------------------------------------------
mkdir -p "$cache"
base=$cache/bookworm-minbase.tar
if [ ! -f "$base" ]; then
	echo "making a minimal Debian 12 root once (debootstrap --variant=minbase; kept in $cache)"
	mkdir "$tmp/base"
	debootstrap --variant=minbase bookworm "$tmp/base" http://deb.debian.org/debian \
		>"$tmp/debootstrap.log" 2>&1 ||
		skip "debootstrap cannot reach Debian's archive: $(tail -3 "$tmp/debootstrap.log")"
	tar -C "$tmp/base" -cf "$base.tmp" . && mv "$base.tmp" "$base"
	rm -rf "$tmp/base"
fi
mkdir "$root"
tar -C "$root" -xf "$base"
cp "$tmp"/*.deb "$root/tmp/"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
mkdir -p "$cache/apt-archives" "$root/var/cache/apt/archives"

# Everything in the root runs in a mount namespace of its own: /proc, /dev/shm and the
# cache of downloaded packages are mounted there and vanish with it. With --alone, in a
# network namespace of its own too (only its loopback, up), so that the cluster's daemons
# share no address or port with anything else on this machine.
inroot() {
	net=""
	if [ "$1" = --alone ]; then
		net=--net
		shift
	fi
	unshare --mount $net --propagation private sh -c '
		root=$1 cache=$2 net=$3
		shift 3
		{ [ -z "$net" ] || ip link set lo up; } &&
		mount -t proc proc "$root/proc" &&
		mount -t tmpfs tmpfs "$root/dev/shm" &&
		mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives" &&
		exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
			LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive /bin/sh -c "$*"' sh "$root" "$cache" \
		"$net" "$@"
}

echo "installing them in a clean root (apt resolves their dependencies)"
inroot 'apt-get update -q && apt-get install -y -q --no-install-recommends \
	/tmp/ntbfab_*.deb /tmp/libntbfab0_*.deb /tmp/libntbfab-dev_*.deb /tmp/libsisci0_*.deb \
	/tmp/libsisci-dev_*.deb gcc libc6-dev pkg-config' >"$tmp/install.log" 2>&1 ||
	fail "apt-get install in the clean root: $(tail -20 "$tmp/install.log")"

# ---- used as an operator would -----------------------------------------------------------------
check() {
	what=$1
	shift
	inroot "$@" >"$tmp/out" 2>&1 || fail "$what: $(cat "$tmp/out")"
}
check_alone() {
	what=$1
	shift
	inroot --alone "$@" >"$tmp/out" 2>&1 || fail "$what: $(cat "$tmp/out")"
}
check "validate" 'ntbfab validate /etc/ntbfab/cluster.yaml.example /usr/share/doc/ntbfab/examples/quickstart.yaml'
grep -q "cluster.yaml.example: valid" "$tmp/out" || fail "validate: $(cat "$tmp/out")"
check "the man pages" 'ls /usr/share/man/man8/ntbfabd.8* /usr/share/man/man8/ntbfab-borrow.8* \
	/usr/share/man/man5/ntbfab-cluster.5* /usr/share/man/man1/ntbfab-nvme.1* && \
	ls /usr/lib/systemd/system/ntbfabd.service /usr/lib/systemd/system/ntbfabd.socket \
	/usr/share/bash-completion/completions/ntbfab && getent passwd ntbfab && \
	test -f /usr/share/doc/ntbfab/copyright'
cp "$src/frontends/sisci-compat/examples/pingpong.c" "$root/tmp/"
check "a SISCI example built against libsisci-dev" \
	'cc -D_REENTRANT -O2 -o /tmp/pingpong /tmp/pingpong.c $(pkg-config --cflags --libs sisci)'
check_alone "a cluster of the installed programs, and the example between two of its nodes" '
	set -e
	ntbfab up /usr/share/doc/ntbfab/examples/quickstart.yaml --dir /dev/shm/pkgtest >/tmp/up.log
	NTBFAB_DIR=/dev/shm/pkgtest NTBFAB_NODE=lender /tmp/pingpong -rn 8 -server -loops 100 \
		>/tmp/server.log 2>&1 &
	NTBFAB_DIR=/dev/shm/pkgtest NTBFAB_NODE=borrower /tmp/pingpong -rn 4 -loops 100
	wait $!
	ntbfab down --dir /dev/shm/pkgtest'
grep -q "100 round trips" "$tmp/out" || fail "pingpong in the clean root: $(cat "$tmp/out")"
echo "the packages install in a clean Debian 12 root; validate, up, a SISCI example, down work there"
echo "1 passed, 0 failed"
