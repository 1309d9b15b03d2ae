#!/bin/sh
# tests/integration/cxx_headers.sh BUILD SRC: every public header compiles as C++ (g++ -Wall
# -Wextra -Werror -pedantic, alone), and a C++ program links against libntbfab and libsisci
# (C linkage: without extern "C" the names would be mangled and the link would fail).
set -u
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v g++ >/dev/null || { echo "SKIP: no g++"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
inc="-I$src/include -I$src/frontends/sisci-compat/include -I$src/frontends/sisci-compat/include/dis"
n=0
for h in "$src"/include/ntbfab/*.h "$src"/frontends/sisci-compat/include/*.h \
	"$src"/frontends/sisci-compat/include/dis/*.h; do
	printf '#include "%s"\nint main() { return 0; }\n' "$h" >"$tmp/one.cc"
	g++ -std=c++17 -Wall -Wextra -Werror -pedantic $inc -c "$tmp/one.cc" -o "$tmp/one.o" \
		2>"$tmp/err" || fail "$h does not compile as C++: $(head -5 "$tmp/err")"
	n=$((n + 1))
done
cat >"$tmp/link.cc" <<'CC'
#include <cstdio>
#include <cstring>
#include "ntbfab/error.h"
#include "ntbfab/units.h"
#include "sisci_api.h"
int main()
{
        uint64_t v = 0;
        if (ntbf_size_parse("64KiB", &v, nullptr) || v != 65536)
                return 1;
        std::printf("%s\n", ntbf_strerror(-2));
        return std::strlen(ntbf_strerror(-2)) ? 0 : 1;
}
CC
g++ -std=c++17 -Wall -Werror $inc "$tmp/link.cc" -o "$tmp/link" -L"$build" \
	-L"$build/frontends/sisci-compat" -lntbfab -lsisci -Wl,-rpath,"$build" \
	-Wl,-rpath,"$build/frontends/sisci-compat" 2>"$tmp/err" ||
	fail "a C++ program does not link: $(head -5 "$tmp/err")"
"$tmp/link" >"$tmp/out" || fail "the C++ program failed"
echo "$n headers compile as C++; a C++ program links and runs: $(cat "$tmp/out")"
echo "1 passed, 0 failed"
