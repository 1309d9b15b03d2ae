#!/bin/sh
# tests/integration/packages.sh BUILD SRC: the Debian packages, installed in a clean root.
#
# Builds the packages from a copy of the source tree with `dpkg-buildpackage -b -us -uc`,
# checks that ntbfab-dkms holds every module's sources and dkms.conf names each, then
# installs them with apt into a fresh copy of a minimal Debian 12 root. That root is made
# from Debian's archive once and kept in the cache (NTBFAB_CACHE, else ~/.cache/ntbfab): the
# debootstrap --variant=minbase root, and that root with the packages' declared
# dependencies installed by apt (which must resolve each of them from the archive), kept
# under the hash of that list, so a change of the dependencies makes a new one.
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
t0=$(date +%s)
# How long each phase took (printed for the time budget of make test, never asserted).
phase() {
	echo "[$(($(date +%s) - t0)) s] $*"
}
tmp=$(mktemp -d /tmp/ntbfab-pkg-XXXXXX)
root=$tmp/root
cleanup() {
	[ -n "${NTBFAB_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- the packages -------------------------------------------------------------------------
phase "building the packages (dpkg-buildpackage -b -us -uc)"
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
# ntbfab-dkms: what kernel/ holds (but its tests) and frontends/mdev/ as mdev/, as
# debian/rules and dkms.conf say; every module of their Kbuild files there and named in
# dkms.conf.
if [ -f "$src/kernel/dkms.conf" ]; then
	mkdir "$tmp/dkms"
	dpkg-deb -x "$tmp"/ntbfab-dkms_*.deb "$tmp/dkms"
	usrc=$(ls -d "$tmp"/dkms/usr/src/*/ 2>/dev/null | head -1)
	[ -n "$usrc" ] && [ -f "$usrc/dkms.conf" ] ||
		fail "ntbfab-dkms holds no /usr/src/NAME-VERSION/dkms.conf although kernel/ has one"
	: >"$tmp/want"
	for m in kernel:. frontends/mdev:mdev; do
		[ -d "$src/${m%%:*}" ] || continue
		(cd "$src/${m%%:*}" && find . -path ./test -prune -o -type f \( -name '*.[ch]' -o \
			-name Kbuild -o -name Makefile -o -name dkms.conf \) -print |
			sed "s|^\./|./${m#*:}/|; s|^\./\./|./|") >>"$tmp/want"
	done
	sort -o "$tmp/want" "$tmp/want"
	(cd "$usrc" && find . -type f | sort) >"$tmp/got"
	diff "$tmp/want" "$tmp/got" >"$tmp/diff" ||
		fail "ntbfab-dkms does not hold the module sources (< the tree, > the package): $(cat "$tmp/diff")"
	mods=""
	for kb in $(cd "$usrc" && find . -name Kbuild | sort); do
		for m in $(sed -n 's/^obj-[^ ]* *[:+]\{0,1\}= *//p' "$usrc/$kb" | tr ' ' '\n' |
			sed -n 's/\.o$//p'); do
			[ -f "$usrc/$(dirname "$kb")/$m.c" ] ||
				fail "ntbfab-dkms lacks $(dirname "$kb")/$m.c, a module of its $kb"
			grep -q "^[[:space:]]*BUILT_MODULE_NAME\[[^]]*\]=\"$m\"" "$usrc/dkms.conf" ||
				fail "kernel/dkms.conf does not name $m (a module of $kb): add BUILT_MODULE_NAME[N]=\"$m\""
			mods="$mods $m"
		done
	done
	[ -n "$mods" ] || fail "no Kbuild of ntbfab-dkms names a module"
	phase "ntbfab-dkms holds the module sources and dkms.conf names each module:$mods"
fi

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

# ---- a clean root ---------------------------------------------------------------------------
mkdir -p "$cache"
base=$cache/bookworm-minbase.tar
if [ ! -f "$base" ]; then
	phase "making a minimal Debian 12 root once (debootstrap --variant=minbase; kept in $cache)"
	mkdir "$tmp/base"
	debootstrap --variant=minbase bookworm "$tmp/base" http://deb.debian.org/debian \
		>"$tmp/debootstrap.log" 2>&1 ||
		skip "debootstrap cannot reach Debian's archive: $(tail -3 "$tmp/debootstrap.log")"
	tar -C "$tmp/base" -cf "$base.$$" . && mv "$base.$$" "$base"
	rm -rf "$tmp/base"
fi
mkdir "$root"
mkdir -p "$cache/apt-archives"

# What the packages declare they depend on (first alternatives, without versions), and what
# the SISCI example needs to be compiled there.
ours="ntbfab libntbfab0 libntbfab-dev libsisci0 libsisci-dev"
need=$(for p in $ours; do dpkg-deb -f "$tmp"/${p}_*.deb Depends; done | tr ',' '\n' |
	sed 's/|.*//; s/(.*//; s/[[:space:]]//g' | grep -v '^$' |
	grep -vxF -e ntbfab -e libntbfab0 -e libntbfab-dev -e libsisci0 -e libsisci-dev |
	sort -u | tr '\n' ' ')
need="${need}gcc libc6-dev pkg-config"
deps=$cache/bookworm-minbase-deps-$(echo "$need" | sha256sum | cut -c1-16).tar
if [ -f "$deps" ]; then
	tar -C "$root" -xf "$deps"
else
	phase "installing the packages' dependencies in a copy of it once (kept in $deps): $need"
	tar -C "$root" -xf "$base"
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
	mkdir -p "$root/var/cache/apt/archives"
	inroot "apt-get update -q && apt-get install -y -q --no-install-recommends $need" \
		>"$tmp/deps.log" 2>&1 ||
		fail "apt-get install of the packages' dependencies: $(tail -20 "$tmp/deps.log")"
	tar -C "$root" -cf "$deps.$$" . && mv "$deps.$$" "$deps"
fi
cp "$tmp"/*.deb "$root/tmp/"

phase "installing them in a clean root (apt: their dependencies are there already)"
inroot 'apt-get install -y -q --no-install-recommends /tmp/ntbfab_*.deb \
	/tmp/libntbfab0_*.deb /tmp/libntbfab-dev_*.deb /tmp/libsisci0_*.deb /tmp/libsisci-dev_*.deb' \
	>"$tmp/install.log" 2>&1 ||
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
phase "used as an operator would"
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
phase "the packages install in a clean Debian 12 root; validate, up, a SISCI example, down work there"
echo "1 passed, 0 failed"
