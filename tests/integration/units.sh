#!/bin/sh
# tests/integration/units.sh BUILD SRC: the systemd files ntbfab installs are what systemd
# accepts: the units pass `systemd-analyze verify` (no output at all: every warning fails),
# tmpfiles.d makes /run/ntbfab and sysusers.d the user ntbfab (both applied to a scratch
# root). systemd need not run: these tools read files. A misspelled key is shown to fail.
set -u
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze (package systemd)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# verify checks that ExecStart's program exists: the installed path becomes the built one.
grep -q '^ExecStart=/.*/sbin/ntbfabd ' "$build/dist/ntbfabd.service" ||
	fail "ExecStart does not start sbin/ntbfabd: $(grep ExecStart "$build/dist/ntbfabd.service")"
sed "s|^ExecStart=[^ ]*|ExecStart=$build/daemon/ntbfabd|" "$build/dist/ntbfabd.service" \
	>"$tmp/ntbfabd.service"
cp "$src/dist/systemd/ntbfabd.socket" "$tmp/"
# The Documentation= man pages are checked too when man can find the built ones.
man=no
if command -v man >/dev/null && [ -f "$build/man/ntbfabd.8" ]; then
	mkdir -p "$tmp/man/man5" "$tmp/man/man8"
	cp "$build"/man/*.5 "$tmp/man/man5/"
	cp "$build"/man/*.8 "$tmp/man/man8/"
	man=yes
fi
out=$(MANPATH="$tmp/man" systemd-analyze verify --man=$man "$tmp/ntbfabd.service" \
	"$tmp/ntbfabd.socket" 2>&1)
rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] || fail "systemd-analyze verify (exit $rc): $out"
echo "units verified (man pages checked: $man)"

# The check can fail: a misspelled key is reported.
mkdir "$tmp/bad"
sed 's/^RestartSec=/RestartSecs=/' "$tmp/ntbfabd.service" >"$tmp/bad/ntbfabd.service"
out=$(systemd-analyze verify --man=no "$tmp/bad/ntbfabd.service" 2>&1)
echo "$out" | grep -q "RestartSecs" || fail "a misspelled key went unnoticed: $out"

# tmpfiles.d and sysusers.d, applied to a scratch root.
root=$tmp/root
mkdir -p "$root/etc" "$root/run"
systemd-tmpfiles --create --root="$root" "$src/dist/systemd/ntbfab.tmpfiles" ||
	fail "systemd-tmpfiles refused ntbfab.tmpfiles"
[ "$(stat -c %a "$root/run/ntbfab")" = 755 ] || fail "tmpfiles.d did not make /run/ntbfab 0755"
if command -v systemd-sysusers >/dev/null; then
	: >"$root/etc/passwd"
	: >"$root/etc/group"
	systemd-sysusers --root="$root" "$src/dist/systemd/ntbfab.sysusers" ||
		fail "systemd-sysusers refused ntbfab.sysusers"
	grep -q '^ntbfab:' "$root/etc/passwd" || fail "sysusers.d made no user ntbfab"
	grep -q '^ntbfab:' "$root/etc/group" || fail "sysusers.d made no group ntbfab"
fi
echo "1 passed, 0 failed"
