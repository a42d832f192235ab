#!/usr/bin/env bash
# CTest install_check: `cmake --install` into a temporary prefix, then the installed binary,
# run from an empty folder, finds the shipped configs by name (no source tree involved).
# The prefix is a fresh temporary folder outside the build tree. Arguments: CMAKE BUILD_DIR SOURCE_DIR
set -euo pipefail
cmake=$1 build=$2 src=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/gmb_install_check.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "install_check: $*" >&2; exit 1; }
mkdir -p "$work/empty"
"$cmake" --install "$build" --prefix "$work/P" >/dev/null
bin="$work/P/bin/gpumembench"
[ -x "$bin" ] || fail "no $bin after cmake --install"
for f in share/gpumembench/plot.py share/doc/gpumembench/README.md share/doc/gpumembench/docs/TRACES.md; do
  [ -f "$work/P/$f" ] || fail "P/$f is not installed"
done
# Every shipped file, traces included, is installed.
(cd "$src/configs" && find . -type f | sort) > "$work/shipped.txt"
(cd "$work/P/share/gpumembench/configs" && find . -type f | sort) > "$work/installed.txt"
diff "$work/shipped.txt" "$work/installed.txt" >/dev/null || fail "installed configs differ from configs/: $(diff "$work/shipped.txt" "$work/installed.txt")"

cd "$work/empty"
out=$("$bin" --config dynamic_seq --device sim --steps 5 --quiet) || fail "--config dynamic_seq exited $?: $out"
grep -q "caching" <<<"$out" || fail "the table has no caching row: $out"
results=(results/dynamic_seq-*/results.json)
[ -f "${results[0]}" ] || fail "no results/dynamic_seq-*/results.json in the working folder"
n=$(grep -c '"steps_completed": 5,' "${results[0]}") || true
cases=$(grep -c '"allocator_label":' "${results[0]}") || true
[ "$n" -ge 1 ] && [ "$n" = "$cases" ] || fail "results.json: $n of $cases cases completed 5 steps"

# With .yaml, and a path, work too.
"$bin" --config dynamic_seq.yaml --device sim --steps 1 --quiet --output by_file_name >/dev/null || fail "--config dynamic_seq.yaml failed"
"$bin" --config "$work/P/share/gpumembench/configs/hole_pattern.yaml" --device sim --quiet --output by_path >/dev/null \
  || fail "--config PATH failed"

# An unknown name: exit 2, the message lists the shipped configs, nothing written.
set +e
err=$("$bin" --config no_such_config --device sim --output unknown 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] || fail "--config no_such_config exited $rc (want 2): $err"
for f in "$src"/configs/*.yaml; do
  name=$(basename "$f" .yaml)
  grep -q "$name" <<<"$err" || fail "the unknown-config message does not list $name: $err"
done
[ ! -e unknown ] || fail "an unknown config wrote its output folder"

# `gpumembench configs` lists every shipped config with its first comment line.
list=$("$bin" configs) || fail "gpumembench configs exited $?"
for f in "$src"/configs/*.yaml; do
  name=$(basename "$f" .yaml)
  first=$(grep -m1 '^#' "$f" | sed 's/^#[# ]*//' | cut -c1-40)
  grep -qF "  $name" <<<"$list" || fail "gpumembench configs does not list $name: $list"
  grep -qF "$first" <<<"$list" || fail "gpumembench configs lacks the description of $name ('$first'): $list"
done
grep -qF "In: $work/P/share/gpumembench/configs" <<<"$list" || fail "gpumembench configs does not say where they are: $list"
if grep -qF "$src" <<<"$list"; then fail "the installed binary looked into the source tree: $list"; fi
echo "install_check: installed into $work/P; ran dynamic_seq by name from an empty folder; $(ls "$src"/configs/*.yaml | wc -l) configs listed"
