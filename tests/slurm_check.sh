#!/usr/bin/env bash
# scripts/slurm/ without Slurm: stub sbatch and srun on PATH record their arguments. submit.sh
# must submit the array (--array=0-2, sweep.sbatch) and then the merge with
# --dependency=afterok:<the array's id>; the array's tasks (run here one after another, with the
# environment Slurm gives them) each run their shard through srun, and the merge job joins them
# into the tables of a run of the whole sweep.
#   slurm_check.sh GPUMEMBENCH SOURCE_DIR WORK_DIR
set -u
bin="$1" src="$2" work="$3"
rm -rf "$work" && mkdir -p "$work/stubs"
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$work/stubs/sbatch" <<'STUB'
#!/usr/bin/env bash
n=$(( $(cat "$STUB_LOG.count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$STUB_LOG.count"
printf '%s\n' "$@" > "$STUB_LOG.sbatch$n"
echo "GMB_CONFIG=$GMB_CONFIG GMB_OUT=$GMB_OUT GMB_ARGS=$GMB_ARGS" > "$STUB_LOG.sbatch$n.env"
echo "$((1000 + n));cluster0"
STUB
cat > "$work/stubs/srun" <<'STUB'
#!/usr/bin/env bash
printf '%s\n' "$@" > "$STUB_LOG.srun.$SLURM_ARRAY_TASK_ID"
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done  # srun's own options
exec "$@"
STUB
chmod +x "$work/stubs/sbatch" "$work/stubs/srun"
export PATH="$work/stubs:$PATH" STUB_LOG="$work/log"
config="$src/configs/hole_pattern.yaml"
out="$work/sweep"

"$src/scripts/slurm/submit.sh" "$config" "$out" 3 --device sim --steps 5 -- --partition=gpu > "$work/submit.out" \
  || fail "submit.sh exited $?"
[ "$(cat "$work/log.count")" = 2 ] || fail "sbatch called $(cat "$work/log.count") times, not 2"
expect() { grep -qxF -- "$2" "$1" || { cat "$1" >&2; fail "$1 lacks the argument '$2'"; }; }
expect "$work/log.sbatch1" "--array=0-2"
expect "$work/log.sbatch1" "--partition=gpu"
expect "$work/log.sbatch1" "$src/scripts/slurm/sweep.sbatch"
expect "$work/log.sbatch2" "--dependency=afterok:1001"
expect "$work/log.sbatch2" "$src/scripts/slurm/merge.sbatch"
grep -qF "GMB_CONFIG=$config GMB_OUT=$out GMB_ARGS=--device sim --steps 5" "$work/log.sbatch1.env" \
  || fail "the array's environment: $(cat "$work/log.sbatch1.env")"
grep -q "merge: job 1002" "$work/submit.out" || fail "submit.sh output: $(cat "$work/submit.out")"
"$src/scripts/slurm/submit.sh" "$config" "$out" 0 2> "$work/bad.err" && fail "SHARDS 0 accepted"
grep -q "is not a count" "$work/bad.err" || fail "SHARDS 0: $(cat "$work/bad.err")"

# The array's tasks as Slurm starts them (inside srun: SLURM_PROCID=0, SLURM_NTASKS=1).
export GMB_CONFIG="$config" GMB_OUT="$out" GMB_ARGS="--device sim --steps 5 --quiet" GMB_BIN="$bin"
for i in 0 1 2; do
  SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_MIN=0 SLURM_PROCID=0 SLURM_NTASKS=1 \
    bash "$src/scripts/slurm/sweep.sbatch" > "$work/task$i.out" 2>&1 || { cat "$work/task$i.out"; fail "task $i"; }
  expect "$work/log.srun.$i" "--ntasks=1"
  expect "$work/log.srun.$i" "$out/shard-$i"
  grep -q "\"count\": 3" "$out/shard-$i/results.json" || fail "shard-$i is not a shard of 3"
done
# A task run again continues its folder.
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 bash "$src/scripts/slurm/sweep.sbatch" > "$work/again.out" 2>&1 \
  || { cat "$work/again.out"; fail "task 1 again"; }
expect "$work/log.srun.1" "--resume"
bash "$src/scripts/slurm/merge.sbatch" > "$work/merge.out" 2>&1 || { cat "$work/merge.out"; fail "merge.sbatch"; }
"$bin" --config "$config" --device sim --steps 5 --quiet --output "$work/whole" > /dev/null || fail "whole run"
cmp "$out/merged/results.md" "$work/whole/results.md" || fail "merged tables differ from the whole run's"
cmp "$out/merged/results.csv" "$work/whole/results.csv" || fail "merged CSV differs from the whole run's"
echo "slurm_check: OK"
