#!/usr/bin/env bash
# Issue 15, checks 4 and 5: measured pipeline bubble and activation memory
# against `loom plan`, on the CPU backend with one process per rank.
#
# For pp=2 and every schedule (GPipe, 1F1B, interleaved, ZB-H1, ZBV) with
# 4 and 8 microbatches, `loom train --nproc 2 --trace` records when every
# action of every rank starts and ends; the run reports each rank's idle
# fraction (steps after the first) and the saved activations each rank
# held at once. `loom plan` is asked for the same plan (the same schedule
# object, timed with its cost model; --activation-bytes 4 because the run
# is fp32) and the table puts them side by side, with (P - 1) / (M + P - 1)
# for GPipe and 1F1B. Timings want an idle machine with at least 2 cores.
#
#   bench/pp/bubble.sh [BUILD] [MODEL] [OUT_DIR]
#
# MODEL defaults to the zoo's llama-l4 (4 layers) unpacked in a build tree
# (a bundle has none: tar -xJf test/fixtures/zoo.tar.xz -C DIR first); the
# sizes (batch 32 x seq 256, 6 steps) keep each action in the milliseconds.
set -euo pipefail
BUILD=${1:-build}
MODEL=${2:-$BUILD/test/fixtures/zoo/llama-l4.dynamic.onnx}
OUT=${3:-pp-bubble}
LOOM=$BUILD/tools/loom/loom
# A GPU bundle (scripts/build-gpu-bundle.sh) carries the libraries loom needs.
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
DATA=$(dirname "$0")/../../test/fixtures/corpus.u16.bin
BATCH=${BATCH:-32}
SEQ=${SEQ:-256}
STEPS=${STEPS:-6}
mkdir -p "$OUT"
printf '%-12s %3s | %-27s | %-27s | %-8s | %-33s\n' schedule M "measured idle r0 / r1 (mean)" \
  "loom plan idle r0 / r1 (mean)" "(P-1)/(M+P-1)" "activations r0 / r1: measured, loom plan (MiB)"
for sched in gpipe:1 1f1b:1 interleaved:2 zb:1 zb:2; do
  kind=${sched%:*}
  v=${sched#*:}
  for m in 4 8; do
    tag=$kind-v$v-m$m
    "$LOOM" train "$MODEL" --data "$DATA" --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" \
      --plan "pp=2,pp_schedule=$kind,pp_virtual=$v,microbatches=$m" --nproc 2 --threads 2 \
      --trace "$OUT/$tag.trace.json" > "$OUT/$tag.train.txt"
    "$LOOM" plan "$MODEL" --gpus 2 --gpu h100 --batch $((BATCH / m)) --seq "$SEQ" \
      --global-batch "$BATCH" --activation-bytes 4 --top 1000 --json > "$OUT/$tag.plan.json"
    python3 - "$OUT/$tag.train.txt" "$OUT/$tag.plan.json" "$kind" "$v" "$m" <<'EOF'
import json, re, sys
train, plan, kind, v, m = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
text = open(train).read()
idle = [float(x) for x in re.findall(r'^  rank \d+: ([0-9.]+)% \(', text, re.M)]
held = [int(x) for x in re.findall(r'^  rank \d+: (\d+) B \(', text, re.M)]
want = 'zb' if kind == 'zb' else kind
plans = [p for p in json.load(open(plan))['plans']
         if p['pp'] == 2 and p['schedule'] == want and p['virtual_stages'] == v
         and p['microbatches'] == m and p['checkpoint'] == 'none' and not p['fp8']]
p = plans[0]
pidle = [100 * f for f in p['time']['idle_fraction_per_pipeline_rank']]
pact = p['activations_per_pipeline_rank']
theory = '%.1f%%' % (100.0 / (m + 1)) if kind in ('gpipe', '1f1b') else '-'
mib = lambda b: b / 2**20
print('%-12s %3d | %5.1f%% / %5.1f%% (%5.1f%%)   | %5.1f%% / %5.1f%% (%5.1f%%)   | %-13s | %6.2f / %6.2f, %6.2f / %6.2f'
      % ('%s v=%d' % (kind, v), m, idle[0], idle[1], sum(idle) / 2, pidle[0], pidle[1],
         sum(pidle) / 2, theory, mib(held[0]), mib(held[1]), mib(pact[0]), mib(pact[1])))
EOF
  done
done
