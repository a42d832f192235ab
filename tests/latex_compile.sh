#!/usr/bin/env bash
# CTest latex_compile: every shipped config runs on the simulated device (a few steps), and its
# results.tex must compile with pdflatex, as the file says ("\input{results.tex}"), in a
# one-column article (table) and in a two-column paper (table*), at the article's normal size,
# without an overfull box (a table wider than the text). So must compare.tex of two shipped
# results. Exit 77 (skipped) where pdflatex is not installed; CI installs it
# (texlive-latex-base, texlive-latex-recommended for booktabs). One run also has a baseline.
# Usage: latex_compile.sh GPUMEMBENCH SOURCE_DIR WORK_DIR
set -euo pipefail
binary=$1 source_dir=$2 work=$3
if ! command -v pdflatex >/dev/null; then
  echo "latex_compile: pdflatex not found (Debian: texlive-latex-base texlive-latex-recommended); skipped"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
failures=0

# compile DIR FILE NAME: \input{FILE} from DIR in both layouts; counts a failure per layout.
compile() {
  local dir=$1 file=$2 name=$3 layout env doc
  for layout in onecolumn twocolumn; do
    env=table; [ "$layout" = twocolumn ] && env='table*'
    doc="$dir/$layout.tex"
    cat >"$doc" <<TEX
\\documentclass[$layout]{article}
\\usepackage{booktabs,tabularx}
\\begin{document}
Text before the table.
\\begin{$env}
\\centering
\\input{$file}
\\caption{${name//_/\\_}}
\\end{$env}
Text after the table.
\\end{document}
TEX
    if ! (cd "$dir" && pdflatex -interaction=nonstopmode -halt-on-error "$layout.tex" >/dev/null 2>&1); then
      echo "latex_compile: $name ($layout): pdflatex failed:"; grep -A3 '^!' "$dir/$layout.log" || tail -20 "$dir/$layout.log"
      failures=$((failures + 1)); continue
    fi
    # TeX reports a line or table wider than its box as "Overfull \hbox (12.3pt too wide)".
    if grep -q 'Overfull \\hbox' "$dir/$layout.log"; then
      echo "latex_compile: $name ($layout): $file is wider than the text:"
      grep -A2 'Overfull \\hbox' "$dir/$layout.log"
      failures=$((failures + 1)); continue
    fi
    echo "latex_compile: $name ($layout): compiled, fits the text width"
  done
}

for config in "$source_dir"/configs/*.yaml; do
  name=$(basename "$config" .yaml)
  out="$work/$name"
  if ! "$binary" --device sim --quiet --steps 3 --config "$config" --output "$out" --format latex >"$work/$name.stdout" 2>&1; then
    echo "latex_compile: gpumembench failed on $config:"; cat "$work/$name.stdout"; failures=$((failures + 1)); continue
  fi
  compile "$out" results.tex "$name"
done

# The widest table: a transformer (steps/s, tokens/s) with both baseline columns.
out="$work/dynamic_seq_baseline"
if "$binary" --device sim --quiet --steps 3 --config "$source_dir/configs/dynamic_seq.yaml" --baseline caching \
    --output "$out" --format latex >"$work/dynamic_seq_baseline.stdout" 2>&1; then
  compile "$out" results.tex dynamic_seq_baseline
else
  echo "latex_compile: gpumembench --baseline failed:"; cat "$work/dynamic_seq_baseline.stdout"; failures=$((failures + 1))
fi

# Every published fragmentation metric (--metrics all): they go in tables of their own under the
# main one, each as wide as the line at most.
out="$work/allocators_metrics"
if "$binary" --device sim --quiet --steps 3 --config "$source_dir/configs/allocators.yaml" --metrics all \
    --output "$out" --format latex >"$work/allocators_metrics.stdout" 2>&1; then
  grep -c 'begin{tabularx}' "$out/results.tex" | grep -qv '^1$' || { echo "latex_compile: --metrics all made one table"; failures=$((failures + 1)); }
  compile "$out" results.tex allocators_metrics
else
  echo "latex_compile: gpumembench --metrics all failed:"; cat "$work/allocators_metrics.stdout"; failures=$((failures + 1))
fi

if "$binary" compare "$source_dir/results/h200/dynamic_seq" "$source_dir/results/h200/fixed_seq" --format latex \
    --output "$work/compare" >"$work/compare.stdout" 2>&1; then
  compile "$work/compare" compare.tex compare
else
  echo "latex_compile: gpumembench compare failed:"; cat "$work/compare.stdout"; failures=$((failures + 1))
fi
[ "$failures" = 0 ] || { echo "latex_compile: $failures failure(s)"; exit 1; }
