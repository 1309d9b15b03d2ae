#!/bin/sh
# tests/integration/sisci_abi.sh BUILD SRC: libsisci exports exactly the ST and MT names of every
# function sisci_api.h declares, the plain names it marks, and a _SISCI_PUBLIC_CONST_ symbol with the header's value for
# every SCI_FLAG_*, SCI_Q_* and SCI_INFINITE_TIMEOUT; nothing else; versioned SONAME.
set -u
build=$1
src=$2
lib=$build/frontends/sisci-compat/libsisci.so
inc=$src/frontends/sisci-compat/include
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

sed -n 's/^#define \(SCI[A-Za-z]*\) \+\(_SISCI_EXPANDE_FUNCTION_NAME.*\|\\\)$/\1/p' \
	"$inc/sisci_api.h" | sort >"$tmp/funcs"
# Undocumented exports under their plain names, marked in the header.
sed -n 's/^[a-z ]* \**\([A-Za-z]*\)(.*plain export.*/\1/p' "$inc/sisci_api.h" | sort >"$tmp/plain"
[ "$(wc -l <"$tmp/plain")" -ge 2 ] || fail "found no plain exports in the header"
sed -n 's/^#define \(SCI_FLAG_[A-Z0-9_]*\|SCI_Q_[A-Z0-9_]*\|SCI_INFINITE_TIMEOUT\) .*/\1/p' \
	"$inc/sisci_types.h" | sort >"$tmp/consts"
[ "$(wc -l <"$tmp/funcs")" -ge 70 ] || fail "found only $(wc -l <"$tmp/funcs") functions in the header"
{
	sed 's/^/_SISCI_PUBLIC_FUNC_MT_/' "$tmp/funcs"
	sed 's/^/_SISCI_PUBLIC_FUNC_ST_/' "$tmp/funcs"
	sed 's/^/_SISCI_PUBLIC_CONST_/' "$tmp/consts"
	cat "$tmp/plain"
} | sort >"$tmp/want"
nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | grep -v '^SISCI_' | sort >"$tmp/have"
diff "$tmp/want" "$tmp/have" >"$tmp/diff" || {
	cat "$tmp/diff" >&2
	fail "exports differ from the header (< missing, > extra)"
}
readelf -d "$lib" | grep -q 'SONAME.*libsisci.so.0' || fail "SONAME is not libsisci.so.0"
readelf -W --dyn-syms "$lib" | grep -q '_SISCI_PUBLIC_FUNC_ST_SCIOpen@@SISCI_5.11' ||
	fail "no SISCI_5.11 symbol version"

# The ST name is the MT function itself, and every constant has the header's value.
{
	# printf %s: the shell must not expand the C escapes.
	printf '%s\n' '#include <dlfcn.h>' '#include <stdio.h>' '#include "sisci_api.h"' \
		'int main(void) {' "  void *h = dlopen(\"$lib\", RTLD_NOW); int bad = 0;" \
		'  if (!h) { puts(dlerror()); return 1; }'
	while read -r f; do
		printf '%s\n' "  if (dlsym(h, \"_SISCI_PUBLIC_FUNC_ST_$f\") != dlsym(h, \"_SISCI_PUBLIC_FUNC_MT_$f\")) { puts(\"$f\"); bad = 1; }"
	done <"$tmp/funcs"
	while read -r c; do
		printf '%s\n' "  { const unsigned *p = dlsym(h, \"_SISCI_PUBLIC_CONST_$c\"); if (!p || *p != (unsigned)($c)) { puts(\"$c\"); bad = 1; } }"
	done <"$tmp/consts"
	printf '%s\n' '  return bad; }'
} >"$tmp/check.c"
san=""
readelf -d "$lib" | grep -q 'libasan' && san="-fsanitize=address,undefined"
cc $san -I"$inc" -I"$inc/dis" "$tmp/check.c" -o "$tmp/check" -ldl || fail "cannot build the check"
"$tmp/check" || fail "the names or values above differ"
echo "libsisci: $(wc -l <"$tmp/funcs") functions (ST and MT), $(wc -l <"$tmp/consts") constants, nothing else"
