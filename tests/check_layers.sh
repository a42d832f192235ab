#!/usr/bin/env bash
# The one-way rule, checked on the #include lines: each layer includes only itself and the layers
# listed below it. Prints every include that points up or sideways (file:line: the include and
# what the file's layer may include) and exits 1; exits 0 when there are none.
#
# Top level (lowest first): common, devices, allocators, workloads, harness; each may include
# the ones before it. Inside harness/, by folder (the files at the top of harness/ and report/
# are the reports):
#   io: -    run: io    report: run io    config: run io    export: run io
#   compare: report run io    frontier, reduce, sweep: config report run io    cli: everything
set -u
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root" || exit 2

top_order=(common devices allocators workloads harness)
declare -A harness_allowed=(
  [io]="io"
  [run]="run io"
  [report]="report run io"
  [config]="config run io"
  [export]="export run io"
  [compare]="compare report run io"
  [frontier]="frontier config report run io"
  [reduce]="reduce config report run io"
  [sweep]="sweep config report run io"
  [cli]="cli sweep reduce frontier compare export config report run io"
)

rank() {  # position of a top-level folder in top_order; empty when it is not a layer
  local i
  for i in "${!top_order[@]}"; do [ "${top_order[$i]}" = "$1" ] && echo "$i" && return; done
}
harness_layer() {  # harness/run/x.h -> run; harness/report.h (top of harness/) -> report
  local rest="${1#harness/}"
  case "$rest" in
    */*) echo "${rest%%/*}" ;;
    *) echo report ;;
  esac
}

bad=0
while IFS= read -r file; do
  from_top="${file%%/*}"
  from_rank="$(rank "$from_top")"
  [ -n "$from_rank" ] || continue
  from_sub=""
  [ "$from_top" = harness ] && from_sub="$(harness_layer "$file")"
  while IFS=: read -r line inc; do
    to_top="${inc%%/*}"
    to_rank="$(rank "$to_top")"
    [ -n "$to_rank" ] || continue
    if [ "$to_rank" -gt "$from_rank" ]; then
      echo "$file:$line: includes $inc, a layer above $from_top/ (order: ${top_order[*]})"
      bad=1
    elif [ -n "$from_sub" ] && [ "$to_top" = harness ]; then
      to_sub="$(harness_layer "$inc")"
      allowed="${harness_allowed[$from_sub]-}"
      if [ -z "$allowed" ]; then
        echo "$file: harness/$from_sub/ is not in tests/check_layers.sh's table of harness layers"
        bad=1
      elif [[ " $allowed " != *" $to_sub "* ]]; then
        echo "$file:$line: includes $inc ($to_sub); harness/$from_sub may include: $allowed"
        bad=1
      fi
    fi
  done < <(grep -n '^#include "' "$file" | sed -E 's/^([0-9]+):#include "([^"]+)".*/\1:\2/')
done < <(git ls-files --cached --others --exclude-standard '*.h' '*.cpp' '*.cu' '*.cuh')
exit $bad
