# ntbfab: the two user-facing targets are `make run` and `make test` (see README.md).
# Both install any missing Debian build dependency first, then configure and build.

BUILD   ?= build
ASAN    ?= build-asan
FUZZ    ?= build-fuzz
FUZZ_SECONDS ?= 30
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Debian packages the build and the tests need (the VM and kernel tiers, tests/vm and
# tests/kernel: QEMU, a static busybox for the guests' initramfs, cpio to pack it, xz for the
# guest kernel and the kernel source; zlib1g-dev for linking the guest programs statically
# against libsqlite3.a; perl for the kernel's checkpatch.pl; the daemon on a host:
# libsystemd-dev, libcap-ng-dev; its tests: systemd (systemd-analyze), iproute2 (network
# namespaces); the man pages: scdoc; pictures: graphviz; the C++ header test: g++; the Debian
# packages and their test in a clean root: dpkg-dev, debhelper, dh-dkms, debootstrap).
DEPS := gcc g++ make meson ninja-build pkg-config clang libclang-rt-14-dev \
	libyaml-dev libuv1-dev libjson-c-dev libsqlite3-dev libsodium-dev libcmocka-dev \
	libsystemd-dev libcap-ng-dev scdoc graphviz \
	zlib1g-dev qemu-system-x86 busybox-static cpio xz-utils e2fsprogs perl \
	systemd iproute2 python3 dpkg-dev debhelper dh-dkms debootstrap

.PHONY: run test test-mdev test-packages _deps _build _asan _fuzz
.DEFAULT_GOAL := run

run: _build
	@sh tools/run-demo.sh $(BUILD)

test: _build _asan _fuzz
	meson test -C $(BUILD) --print-errorlogs --num-processes 2 --no-suite packages
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C $(ASAN) --suite unit --print-errorlogs --num-processes 2
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 CHAOS_SECONDS=30 \
		meson test -C $(ASAN) --suite daemon --print-errorlogs --num-processes 1
	sh tests/fuzz/run.sh $(FUZZ) $(FUZZ_SECONDS)

# The nested-VM test of VM pass-through (tests/mdev, docs/kernel.md) on its own; `make test` runs
# it too (alone: meson runs no other test beside it).
test-mdev: _build
	meson test -C $(BUILD) --suite kernel-nested --print-errorlogs

# The Debian packages built and installed in a clean Debian 12 root (tests/integration/
# packages.sh): the root takes about 10 minutes to make on a fresh machine, so not part of
# `make test` either.
test-packages: _build
	meson test -C $(BUILD) --suite packages --print-errorlogs

# Install what is missing: one `apt-get update`, then one `apt-get install`.
_deps:
	@missing=""; for p in $(DEPS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' \
			|| missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing build dependencies:$$missing"; \
		$(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends $$missing; \
	fi

_build: _deps
	@[ -f $(BUILD)/build.ninja ] || meson setup $(BUILD)
	ninja -C $(BUILD)

_asan: _deps
	@[ -f $(ASAN)/build.ninja ] || meson setup $(ASAN) -Db_sanitize=address,undefined \
		-Db_lundef=false -Dbuildtype=debug -Dbench=false
	ninja -C $(ASAN)

_fuzz: _deps
	@[ -f $(FUZZ)/build.ninja ] || CC=clang meson setup $(FUZZ) -Dfuzz=true \
		-Dbuildtype=debugoptimized -Dbench=false -Dtests=disabled
	ninja -C $(FUZZ)
