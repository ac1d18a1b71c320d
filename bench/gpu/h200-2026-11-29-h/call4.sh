#!/bin/bash
# call 4 (tenth session): llama-1b past the power transient. The suite times steps 3-10 of 11 on
# both sides; loom's steps 6-7 run ~10% slow in every run (the card reaches its 700 W limit ~0.8 s
# into the load and the clock dips below its steady value before it settles). Here both sides run
# 30 steps and are timed over steps 20-29: loom from its per-step log, PyTorch with torch_suite.py
# (20 warm-up steps, then 10 timed). Same bundle as call 3. Results in $OUT/r.tgz.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r4; mkdir -p $R /tmp/s/llama-1b; T0=$(date +%s)
stamp() { echo "call4: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
mkdir -p /tmp/loom-torch-cache && cat .carry/ind-h200.tar.xz.* | xz -dc | tar xf - -C /tmp/loom-torch-cache
export TORCHINDUCTOR_CACHE_DIR=/tmp/loom-torch-cache/inductor-cache
timeout 300 python3 bench/gpu/export_model.py llama-1b /tmp/s/llama-1b > $R/export.txt 2>&1; stamp export
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 100 > $R/clocks.csv 2>&1 &
timeout 120 $B/tools/loom/loom train /tmp/s/llama-1b/model.onnx --backend cuda --data test/fixtures/corpus.u16.bin \
  --batch 4 --seq 2048 --steps 30 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 --log $R/loom.jsonl > $R/loom.txt 2>&1
stamp loom
timeout 200 python3 bench/gpu/torch_suite.py llama-1b compile 20 10 test/fixtures/corpus.u16.bin > $R/torch.txt 2>&1
stamp torch
kill %1 2>/dev/null
python3 - $R <<'PY'
import json, sys
r = sys.argv[1]
steps = [json.loads(l) for l in open(f'{r}/loom.jsonl')]
print('loom tokens/s by step:', [round(s['tokens_per_s']) for s in steps])
for lo, hi in ((3, 10), (20, 29)):
    w = [s for s in steps if lo <= s['step'] <= hi]
    print(f'loom steps {lo}-{hi}: {8192 * len(w) / sum(s["step_s"] for s in w):.0f} tokens/s')
t = json.loads(open(f'{r}/torch.txt').read().strip().splitlines()[-1])
print(f'torch.compile steps 20-29: {t["tokens_per_s"]} tokens/s (warm-up {t["warmup_s"]} s)')
PY
tar czf $OUT/r.tgz -C /tmp r4
