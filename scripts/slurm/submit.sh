#!/usr/bin/env bash
# Submits a gpumembench sweep to Slurm: a job array of SHARDS tasks, one GPU each
# (sweep.sbatch), and the merge of their folders as a job that runs when all of them succeeded
# (merge.sbatch, --dependency=afterok). Prints the two job ids.
#
#   scripts/slurm/submit.sh CONFIG OUT_DIR SHARDS [gpumembench flags...] [-- sbatch flags...]
#   scripts/slurm/submit.sh sweep.yaml /scratch/sweep 8 --device cuda -- --partition=gpu --time=04:00:00
#
# SHARDS: how many array tasks (at most the number of cases: gpumembench plan --config CONFIG
# lists them). GMB_BIN: the gpumembench the nodes run (default: the one on PATH).
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
config="$1" out="$2" shards="$3"
shift 3
case "$shards" in '' | *[!0-9]* | 0) echo "submit.sh: SHARDS '$shards' is not a count (1, 2, ...)" >&2; exit 2 ;; esac
args=() sbatch_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
sbatch_args=("$@")
export GMB_CONFIG="$config" GMB_OUT="$out" GMB_ARGS="${args[*]}" GMB_BIN="${GMB_BIN:-gpumembench}"
mkdir -p "$out"
array=$(sbatch --parsable --array="0-$((shards - 1))" "${sbatch_args[@]}" "$here/sweep.sbatch")
array="${array%%;*}"  # "id;cluster" on a federation
merge=$(sbatch --parsable --dependency="afterok:$array" "${sbatch_args[@]}" "$here/merge.sbatch")
merge="${merge%%;*}"
echo "sweep: job array $array ($shards tasks, one GPU each) -> $out/shard-*"
echo "merge: job $merge after it succeeds -> $out/merged"
