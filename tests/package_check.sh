#!/usr/bin/env bash
# CTest package_check: `cpack -G DEB` from the build folder; `dpkg-deb -I` must declare the
# Debian libraries the binary links (and nothing of CUDA); the package unpacked with
# `dpkg-deb -x` into a temporary root runs hole_pattern from an empty folder. The .tar.gz
# holds the same tree. Skipped (77) without dpkg-deb. The packages go to a fresh temporary
# folder outside the build tree, removed at the end. Arguments: CPACK BUILD_DIR
set -euo pipefail
cpack=$1 build=$2
fail() { echo "package_check: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null && command -v dpkg-shlibdeps >/dev/null \
  || { echo "package_check: dpkg-deb or dpkg-shlibdeps missing (Debian: dpkg-dev); skipped"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gmb_package_check.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/empty"
"$cpack" -G "DEB;TGZ" -B "$work" --config "$build/CPackConfig.cmake" >"$work/cpack.log" 2>&1 \
  || fail "cpack failed: $(cat "$work/cpack.log")"
debs=("$work"/gpumembench_*.deb)
[ -f "${debs[0]}" ] || fail "no gpumembench_*.deb in $work: $(ls "$work")"
deb=${debs[0]}

info=$(dpkg-deb -I "$deb")
depends=$(sed -n 's/^ Depends: //p' <<<"$info")
[ -n "$depends" ] || fail "dpkg-deb -I shows no Depends: $info"
for lib in libc6 libstdc++6 libyaml-cpp libfmt zlib1g; do
  grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
if grep -qi "cuda\|cublas\|nvidia" <<<"$depends"; then fail "Depends names CUDA: $depends"; fi
grep -q "^ Package: gpumembench$" <<<"$info" || fail "not package gpumembench: $info"

dpkg-deb -x "$deb" "$work/root"
bin="$work/root/usr/bin/gpumembench"
[ -x "$bin" ] || fail "no usr/bin/gpumembench in the package"
cd "$work/empty"
out=$("$bin" --config hole_pattern --device sim --quiet --output hp) || fail "the unpacked binary exited $?: $out"
grep -q "cuda_malloc" <<<"$out" || fail "no cuda_malloc row in the table: $out"
[ -f hp/results.json ] || fail "the unpacked binary wrote no hp/results.json"

tgzs=("$work"/gpumembench-*.tar.gz)
[ -f "${tgzs[0]}" ] || fail "no gpumembench-*.tar.gz in $work"
listing=$(tar tzf "${tgzs[0]}")
for f in bin/gpumembench share/gpumembench/configs/hole_pattern.yaml share/gpumembench/plot.py share/doc/gpumembench/README.md; do
  grep -q "/$f\$" <<<"$listing" || fail "the .tar.gz lacks $f"
done
echo "package_check: $(basename "$deb") ($(stat -c %s "$deb") bytes), Depends: $depends"
