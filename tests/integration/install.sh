#!/bin/sh
# tests/integration/install.sh BUILD SRC: what `meson install` puts on a host: the programs,
# the libraries with versioned SONAMEs, ntbfab.pc and sisci.pc, the headers, the man pages
# (each verb's too), bash completion, the systemd units, the example /etc/ntbfab, the license
# texts; and a program built with `pkg-config ntbfab` against the installed files outside
# the default library path, linked without -rpath-link, that runs on the installed library.
set -u
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
inst=$tmp/root
DESTDIR=$inst meson install -C "$build" --quiet >"$tmp/install.out" 2>&1 ||
	fail "meson install: $(tail -5 "$tmp/install.out")"
prefix=$inst$(meson introspect "$build" --buildoptions |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
has() { [ -e "$prefix/$1" ] || fail "$1 is not installed under the prefix"; }
for f in bin/ntbfab bin/ntbfab-simd bin/ntbfab-nvme sbin/ntbfabd \
	include/ntbfab/device.h include/ntbfab/rpc.h include/sisci/sisci_api.h \
	etc/ntbfab/cluster.yaml.example etc/default/ntbfabd etc/logrotate.d/ntbfab \
	lib/systemd/system/ntbfabd.service lib/systemd/system/ntbfabd.socket \
	lib/tmpfiles.d/ntbfab.conf lib/sysusers.d/ntbfab.conf \
	share/bash-completion/completions/ntbfab share/doc/ntbfab/LICENSE \
	share/doc/ntbfab/GPL-2.0-only.txt share/doc/ntbfab/examples/quickstart.yaml; do
	has "$f"
done
grep -q "GNU GENERAL PUBLIC LICENSE" "$prefix/share/doc/ntbfab/GPL-2.0-only.txt" || fail "GPL text"
grep -q "^Permission is hereby granted" "$prefix/share/doc/ntbfab/LICENSE" || fail "MIT text"
# Every verb's page and the four others, as roff man can show.
if command -v scdoc >/dev/null; then
	for v in $("$build/tools/ntbfab" --help | sed -n '/^verbs:/,/^$/s/^  \([a-z]*\) .*/\1/p'); do
		[ -e "$prefix/share/man/man8/ntbfab-$v.8" ] ||
			fail "share/man/man8/ntbfab-$v.8 is not installed: add '$v' to ntbfab_man_verbs in man/meson.build"
		grep -q "^\.SH SYNOPSIS" "$prefix/share/man/man8/ntbfab-$v.8" || fail "ntbfab-$v.8 is no man page"
	done
	for p in man8/ntbfab.8 man8/ntbfabd.8 man1/ntbfab-nvme.1 man5/ntbfab-cluster.5; do
		has "share/man/$p"
	done
	grep -q -- '--dma-window' "$prefix/share/man/man8/ntbfab-borrow.8" ||
		fail "ntbfab-borrow.8 does not say what 'ntbfab borrow --help' says"
fi
# Versioned SONAMEs.
libdir=$(dirname "$(find "$inst" -name 'libntbfab.so.0' | head -1)")
[ -d "$libdir" ] || fail "no libntbfab.so.0"
for l in ntbfab sisci; do
	readelf -d "$libdir/lib$l.so" | grep -q "SONAME.*\[lib$l\.so\.0\]" ||
		fail "lib$l.so has no SONAME lib$l.so.0"
done
# A program built with pkg-config against the installed files, outside the default path.
pcdir=$libdir/pkgconfig
[ -f "$pcdir/ntbfab.pc" ] && [ -f "$pcdir/sisci.pc" ] || fail "ntbfab.pc and sisci.pc"
cat >"$tmp/app.c" <<'C'
#include <stdio.h>
#include <ntbfab/config.h>
#include <ntbfab/error.h>
int main(int argc, char **argv)
{
        struct ntbf_topo *t;
        struct ntbf_diags d;
        ntbf_diags_init(&d);
        int r = ntbf_config_load(argv[1], &t, &d);
        ntbf_diags_free(&d);
        if (r) {
                printf("%s\n", ntbf_strerror(r));
                return 1;
        }
        printf("%s: %u nodes\n", t->name, t->nnodes);
        ntbf_topo_free(t);
        return argc == 2 ? 0 : 1;
}
C
flags=$(PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$inst pkg-config --cflags --libs ntbfab) ||
	fail "pkg-config ntbfab"
cc "$tmp/app.c" $flags -Wl,-rpath,"$libdir" -o "$tmp/app" 2>"$tmp/err" ||
	fail "cc with pkg-config ntbfab ($flags): $(cat "$tmp/err")"
out=$(env -u LD_LIBRARY_PATH "$tmp/app" "$src/config/examples/cluster-60.yaml") ||
	fail "the program: $out"
[ "$out" = "cluster-60: 60 nodes" ] || fail "the program printed '$out'"
env -u LD_LIBRARY_PATH ldd "$tmp/app" | grep -q "$libdir/libntbfab.so.0" || fail "not run against the installed library"
echo "1 passed, 0 failed"
