#!/usr/bin/env bash
# Issue 15: cost-balanced pipeline cuts against the even split, measured
# on the CPU backend with one process per rank, beside loom plan.
#
#   bench/pp/balance.sh [BUILD] [OUT_DIR]      (REPEAT=3 launch pairs)
#
# Model: test/fixtures/pp/llama-l8-v4k (8 layers, a tied 4096-token head),
# batch 8 x seq 256, pp=2 1F1B with 8 microbatches of one sequence. The
# balanced cuts are loom train's default (--pp-split balanced:PROFILE) costed on
# test/fixtures/pp/h100-flops-and-bytes.json (FLOPs and bytes, no launch
# cost), the even split --pp-split even. For each split:
#  1. the serial schedule (`loom schedule --serial`) measures each stage's
#     forward + backward per microbatch (`--stage-costs-out`);
#  2. the pipelined run, REPEAT times: tokens/s (median of steps 1..) and
#     each rank's idle fraction;
#  3. `loom plan --stage-costs` times the same plan with step 1's costs
#     (the h100 profile prices the even plan: its cuts are the even ones).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
OUT=${2:-pp-balance}
REPEAT=${REPEAT:-3}
LOOM=$BUILD/tools/loom/loom
MODEL=$ROOT/test/fixtures/pp/llama-l8-v4k.dynamic.onnx
PROFILE=$ROOT/test/fixtures/pp/h100-flops-and-bytes.json
DATA=$ROOT/test/fixtures/corpus.u16.bin
mkdir -p "$OUT"
common=(--data "$DATA" --batch 8 --seq 256 --nproc 2 --threads 2)
echo "# bench/pp/balance.sh on $(hostname), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(basename "$MODEL"), batch 8 x seq 256, pp=2 1F1B, M=8; REPEAT=$REPEAT"
"$LOOM" schedule --pp 2 --microbatches 8 --schedule 1f1b --serial --csv "$OUT/serial.csv" > /dev/null
split_arg() { [ "$1" = even ] && echo even || echo "balanced:$PROFILE"; }
for split in even balanced; do
  "$LOOM" train "$MODEL" "${common[@]}" --steps 4 --plan "pp=2,pp_schedule=$OUT/serial.csv,microbatches=8" \
    --pp-split "$(split_arg $split)" --stage-costs-out "$OUT/$split.costs.json" > "$OUT/$split.serial.txt"
  for r in $(seq 1 "$REPEAT"); do
    "$LOOM" train "$MODEL" "${common[@]}" --steps 8 --plan pp=2,pp_schedule=1f1b,microbatches=8 \
      --pp-split "$(split_arg $split)" > "$OUT/$split.run$r.txt"
  done
  gpu=$PROFILE; [ $split = even ] && gpu=h100
  "$LOOM" plan "$MODEL" --gpus 2 --gpu "$gpu" --batch 1 --seq 256 --global-batch 8 --activation-bytes 4 \
    --stage-costs "$OUT/$split.costs.json" --explain pp=2,sched=1f1b,mb=8,ac=none,fp8=off > "$OUT/$split.plan.txt"
done
python3 - "$OUT" "$REPEAT" <<'PY'
import json, re, statistics, sys
out, repeat = sys.argv[1], int(sys.argv[2])
rows = {}
print('%-9s %-12s %-22s %-26s %-22s %-20s %s' % ('split', 'cuts', 'stage F+B ms r0/r1', 'measured tok/s (medians)',
      'measured idle r0/r1 %', 'plan tok/s', 'plan idle r0/r1 %'))
for split in ['even', 'balanced']:
    costs = json.load(open(f'{out}/{split}.costs.json'))
    fb = [1e3 * (c['forward_s'] + c['backward_s']) for c in costs['stage_costs']]
    toks, idles = [], []
    for r in range(1, repeat + 1):
        t = open(f'{out}/{split}.run{r}.txt').read()
        steps = [float(v) for s, v in re.findall(r'^step (\d+) .* tok/s (\d+)', t, re.M) if s != '0']
        toks.append(statistics.median(steps))
        idles.append([float(x) for x in re.findall(r'^  rank \d: ([0-9.]+)% \(', t, re.M)])
    plan = open(f'{out}/{split}.plan.txt').read()
    pstep = float(re.search(r'^step: .* = ([0-9.]+) ms;', plan, re.M).group(1))
    ptok = '%.0f (%.1f ms)' % (8 * 256 / pstep * 1e3, pstep)
    pidle = re.findall(r'idle ([0-9.]+)% of the step', plan)
    assert 'measured stage costs' in plan, split + ': loom plan did not take the measured stage costs'
    med_idle = [statistics.median(i[k] for i in idles) for k in range(2)]
    rows[split] = statistics.median(toks), max(fb)
    print('%-9s %-12s %-22s %-26s %-22s %-20s %s' % (split, costs.get('cuts', 'even'), '%.1f / %.1f' % tuple(fb),
          ' '.join('%.0f' % x for x in toks), '%.1f / %.1f' % tuple(med_idle), ptok, ' / '.join(pidle)))
(bt, bs), (et, es) = rows['balanced'], rows['even']
print('balanced / even: tokens/s %.3fx measured; slowest stage %.3fx as long' % (bt / et, bs / es))
PY
