#!/bin/bash
# call 2 (tenth session): call 1's folds plus the short-row norm kernels eight elements a lane
# (rmsNormLanesKernel, rmsNormGradLanesKernel: head dims 64, 128, 256, the weight gradient's
# partials with dx). In order: the CUDA kernel tests, the fixtures' step-0 gradients and curves,
# the folds bit for bit on the GPU, the zoo (qwen3, gemma3 and olmo2 have per-head norms), then
# qwen3-1.7b: 12 steps with the previous bundle (0208af1, .carry/gpu-prev.tar.xz) and this one in
# turn (old, new, old, new), and the per-opcode profile of steps 2-5 with this one.
# Results in $OUT/r.tgz.
set -u
mkdir -p .carry/old; tar xJf .carry/gpu.tar.xz -C .carry; tar xJf .carry/gpu-prev.tar.xz -C .carry/old
B=.carry/gpu; OLD=.carry/old/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call2: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
for s in qwen3-1.7b; do
  mkdir -p /tmp/s/$s; [ -f /tmp/s/$s/model.onnx ] || (timeout 300 python3 bench/gpu/export_model.py $s /tmp/s/$s > $R/export-$s.txt 2>&1) &
done
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*:CertifiedActivations.*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt | head -20; stamp unit
for m in llama qwen2 gpt2; do
  $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 1 \
    --batching fixture --init-weights $FIX/$m.init.safetensors --expect-grads $FIX/$m.grads0.npz > $R/grads-$m.txt 2>&1
  echo "grads-$m: exit $? $(grep -E 'step-0 gradients' $R/grads-$m.txt)"
  for prec in fp32 bf16; do
    bound=2e-3 extra=(--grad-norm-rel 0.01); [ $prec = bf16 ] && bound=2e-2 extra=(--skip-unstable 2e-2)
    $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 50 \
      --batching fixture --warmup 5 --precision $prec --init-weights $FIX/$m.init.safetensors \
      --log $R/curve-$m-$prec.jsonl --print-program-stats > $R/curve-$m-$prec.txt 2>&1
    echo "curve-$m-$prec: $(python3 test/integration/Inputs/check_curve.py $R/curve-$m-$prec.jsonl $FIX/reference.json $m $prec --max-loss-diff $bound "${extra[@]}")"
  done
done
# the folds bit for bit on the GPU: 3 bf16 steps each way, weights and printed losses compared
mkdir -p /tmp/zoo; tar xJf $FIX/zoo.tar.xz -C /tmp/zoo
for m in $FIX/llama $FIX/gpt2 /tmp/zoo/zoo/qwen3; do
  n=$(basename $m)
  for sw in "LOOM_FOLD_NORM_GRAD_ROUNDING=0" "LOOM_FOLD_CASTS=0" "LOOM_FOLD_CASTS=1"; do
    env $sw LOOM_CUDNN=0 $LOOM train $m.dynamic.onnx --backend cuda --init-weights $m.init.safetensors \
      --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 3 --precision bf16 --print-every 1 \
      --export-weights $R/$n-${sw%%=*}-${sw##*=}.safetensors > $R/$n-${sw%%=*}-${sw##*=}.txt 2>&1
  done
  for sw in LOOM_FOLD_NORM_GRAD_ROUNDING-0 LOOM_FOLD_CASTS-0; do
    cmp $R/$n-$sw.safetensors $R/$n-LOOM_FOLD_CASTS-1.safetensors && \
      diff <(grep ^step $R/$n-$sw.txt | sed 's/ tok.s.*//') <(grep ^step $R/$n-LOOM_FOLD_CASTS-1.txt | sed 's/ tok.s.*//') && \
      echo "$n bf16 cuda: weights and losses identical with $sw and with every fold"
  done
done
rm -f $R/*.safetensors
for mp in llama:bf16 gpt2:bf16; do
  echo "ac-${mp%%:*}-${mp#*:}: $(LOOM_CUDNN=0 timeout 90 python3 test/integration/Inputs/check_recompute.py $LOOM $FIX/${mp%%:*}.dynamic.onnx $FIX/corpus.u16.bin /tmp/ac --backend cuda --precision ${mp#*:} --plan 1 2>&1 | tr '\n' ';' | cut -c1-400)"
done
stamp parity; pack
LOOM_GPU_TEST_OUT=$R/zoo LOOM_GPU_TEST_ZOO_ROWS="bf16 fp32" timeout 120 bash scripts/gpu-test-zoo.sh $B > $R/zoo.txt 2>&1
tail -2 $R/zoo.txt; stamp zoo; rm -rf $R/zoo/*.onnx $R/zoo/*/*.onnx 2>/dev/null; pack
wait
for s in qwen3-1.7b; do
  for v in old new old new; do
    bin=$LOOM lib=$PWD/$B/lib; [ $v = old ] && bin=$OLD/tools/loom/loom lib=$PWD/$OLD/lib
    LD_LIBRARY_PATH=$lib timeout 120 $bin train /tmp/s/$s/model.onnx --backend cuda --data $FIX/corpus.u16.bin \
      --batch 4 --seq 2048 --steps 12 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 \
      --log $R/ab-$s-$v.jsonl > $R/ab-$s-$v.txt 2>&1
    echo "$s $v: $(grep -E '^device memory:' $R/ab-$s-$v.txt) $(grep -E '^step ' $R/ab-$s-$v.txt | awk '{printf "%s ", $NF}')"
  done
  python3 - $R $s <<'PY'
import json, sys
for v in ('old', 'new'):
    steps = [json.loads(l) for l in open(f'{sys.argv[1]}/ab-{sys.argv[2]}-{v}.jsonl')]
    w = [s for s in steps if 3 <= s['step'] <= 10]
    print(f'{sys.argv[2]} {v}: steps 3-10 of the last run {8192 * len(w) / sum(s["step_s"] for s in w):.0f} tokens/s')
PY
  stamp ab-$s; pack
done
for s in qwen3-1.7b; do
  LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=2 timeout 120 $LOOM train /tmp/s/$s/model.onnx --backend cuda \
    --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps 6 --precision bf16 --lr 1e-4 --warmup 0 \
    --print-every 1 > $R/profile-$s.txt 2>&1
  echo "$s:"; grep -E "per run in kernels|^  (cast|rms_norm|rms_norm_grad|add_rms_norm) |  rms_norm" $R/profile-$s.txt | cut -c1-160
done
stamp done; pack
