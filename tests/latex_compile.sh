#!/usr/bin/env bash
# CTest latex_compile: every shipped config runs on the simulated device (a few steps), and its
# results.tex must compile with pdflatex, as the file says ("\input{results.tex}"), in a
# one-column article (table) and in a two-column paper (table*), at the article's normal size,
# without an overfull box (a table wider than the text). Exit 77 (skipped) where pdflatex is
# not installed; CI installs it (texlive-latex-base, texlive-latex-recommended for booktabs).
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
for config in "$source_dir"/configs/*.yaml; do
  name=$(basename "$config" .yaml)
  out="$work/$name"
  if ! "$binary" --device sim --quiet --steps 3 --config "$config" --output "$out" --format latex >"$work/$name.stdout" 2>&1; then
    echo "latex_compile: gpumembench failed on $config:"; cat "$work/$name.stdout"; failures=$((failures + 1)); continue
  fi
  for layout in onecolumn twocolumn; do
    env=table; [ "$layout" = twocolumn ] && env='table*'
    doc="$out/$layout.tex"
    cat >"$doc" <<TEX
\\documentclass[$layout]{article}
\\usepackage{booktabs,tabularx}
\\begin{document}
Text before the table.
\\begin{$env}
\\centering
\\input{results.tex}
\\caption{${name//_/\\_}}
\\end{$env}
Text after the table.
\\end{document}
TEX
    if ! (cd "$out" && pdflatex -interaction=nonstopmode -halt-on-error "$layout.tex" >/dev/null 2>&1); then
      echo "latex_compile: $name ($layout): pdflatex failed:"; grep -A3 '^!' "$out/$layout.log" || tail -20 "$out/$layout.log"
      failures=$((failures + 1)); continue
    fi
    # TeX reports a line or table wider than its box as "Overfull \hbox (12.3pt too wide)".
    if grep -q 'Overfull \\hbox' "$out/$layout.log"; then
      echo "latex_compile: $name ($layout): results.tex is wider than the text:"
      grep -A2 'Overfull \\hbox' "$out/$layout.log"
      failures=$((failures + 1)); continue
    fi
    echo "latex_compile: $name ($layout): compiled, fits the text width"
  done
done
[ "$failures" = 0 ] || { echo "latex_compile: $failures failure(s)"; exit 1; }
