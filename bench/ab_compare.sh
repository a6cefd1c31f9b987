#!/usr/bin/env bash
# Two leantune binaries on the same side_by_side.sh workloads, alternated A B A B on one GPU in one call, so
# that a restructure's "speed unchanged" is measured against the binary of the commit before it:
#   bash bench/ab_compare.sh BASE_BINARY NEW_BINARY [WORKLOAD ...]   (default: side_by_side.sh's four rows)
# Prints per workload the median tokens/s and the memory of each binary over its runs, and NEW/BASE.
set -uo pipefail
base=$1 new=$2
shift 2
out=${OUT:-/tmp/ab_compare}
mkdir -p "$out"
workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(llama8b_lora_1024x8 llama8b_lora_16384x1 llama8b_lora_32768x1 qwen1.5b_full_1024x8)
rounds=${AB_ROUNDS:-2}
table="$out/ab_table.txt"
printf '%-28s %10s %7s %10s %7s %7s\n' workload "base tok/s" "GiB" "new tok/s" "GiB" "new/base" | tee "$table"
for w in "${workloads[@]}"; do
  declare -a bt=() nt=() bg=() ng=()
  for r in $(seq "$rounds"); do
    for side in base new; do
      bin=$base; [ "$side" = new ] && bin=$new
      line=$(LEANTUNE=$bin SKIP_PEERS=1 OUT="$out/${side}_$r" bash bench/side_by_side.sh "$w" | grep "^$w ")
      read -r _ tps gib _ <<< "$line"
      echo "$w round $r $side: $line" >> "$out/ab_runs.txt"
      if [ "$side" = base ]; then bt+=("$tps"); bg+=("$gib"); else nt+=("$tps"); ng+=("$gib"); fi
    done
  done
  python3 - "$w" "${bt[*]}" "${bg[*]}" "${nt[*]}" "${ng[*]}" <<'PY' | tee -a "$table"
import statistics, sys
w, bt, bg, nt, ng = sys.argv[1], *[a.split() for a in sys.argv[2:]]
def med(v):
    nums = [float(x) for x in v if x not in ("-", "failed")]
    return statistics.median(nums) if len(nums) == len(v) and nums else None
b, n = med(bt), med(nt)
fmt = lambda x: "failed" if x is None else f"{x:.0f}"
ratio = f"{n / b:.3f}" if b and n else "-"
print(f"{w:<28} {fmt(b):>10} {max(bg, default='-'):>7} {fmt(n):>10} {max(ng, default='-'):>7} {ratio:>7}")
PY
  unset bt nt bg ng
done
