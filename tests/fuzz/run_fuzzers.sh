#!/usr/bin/env bash
# Runs every libFuzzer harness of BIN_DIR over its seed corpus CORPUS/<reader>, new inputs going to a scratch
# corpus (the committed one is never written). A crash, sanitizer report, leak, timeout or memory blow-up
# stops with the harness's report and the input saved under FINDINGS.
#
#   run_fuzzers.sh BIN_DIR CORPUS FINDINGS runs N SEED     N inputs per harness from SEED: the same campaign
#                                                          on any machine (what CI runs)
#   run_fuzzers.sh BIN_DIR CORPUS FINDINGS seconds T SEED  T seconds per harness; SEED 0 draws a new seed
set -euo pipefail
bin_dir=$1 corpus=$2 findings=$3 mode=$4 amount=$5 seed=$6
case "$mode" in
  runs) budget=(-runs="$amount") what="$amount inputs" ;;
  seconds) budget=(-max_total_time="$amount") what="${amount}s" ;;
  *) echo "run_fuzzers.sh: mode '$mode', expected 'runs' or 'seconds'" >&2; exit 2 ;;
esac
mkdir -p "$findings"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for harness in "$bin_dir"/fuzz_*; do
  name=$(basename "$harness")
  reader=${name#fuzz_}
  [ -d "$corpus/$reader" ] || { echo "no seed corpus $corpus/$reader for $name"; exit 1; }
  mkdir -p "$work/$reader"
  echo "== $name: $what from seed $seed over $(ls "$corpus/$reader" | wc -l) corpus files"
  if ! "$harness" "${budget[@]}" -seed="$seed" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
       -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/$name-" \
       "$work/$reader" "$corpus/$reader" > "$work/$name.log" 2>&1; then
    tail -n 60 "$work/$name.log"
    echo "FAILED: $name (inputs under $findings)"
    status=1
  else
    grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "$work/$name.log" | tail -n 2 || true
  fi
done
exit $status
