#!/bin/bash
# call 2 (ninth session): the loss and its gradient in one instruction (loom-fuse-cross-entropy-grad;
# LOOM_FUSE_CROSS_ENTROPY_GRAD=0 keeps the pair), the rotary rows rule of call 1 (LOOM_CUDA_ROTARY_ROWS=1:
# one row a thread) and the norms' weights loaded before their reductions (not switchable). In order:
# the CUDA kernel tests, the fixtures' step-0 gradients and curves, the fused loss bit for bit on the
# GPU, recompute's bit-identity, the zoo, then llama-1b: 12 steps with both switches off and on in
# turn (off, on, off, on), and the per-opcode profile of steps 2-5 each way. Results in $OUT/r.tgz.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call2: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
mkdir -p /tmp/s/llama-1b; [ -f /tmp/s/llama-1b/model.onnx ] || (timeout 300 python3 bench/gpu/export_model.py llama-1b /tmp/s/llama-1b > $R/export-llama-1b.txt 2>&1) &
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
# the fused loss bit for bit on the GPU: 3 steps each way, weights and printed losses compared
for mp in llama:bf16 llama:fp32 qwen2:bf16; do
  m=${mp%%:*} prec=${mp#*:}
  for ce in 0 1; do
    LOOM_FUSE_CROSS_ENTROPY_GRAD=$ce LOOM_CUDNN=0 $LOOM train $FIX/$m.dynamic.onnx --backend cuda \
      --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 3 --precision $prec --print-every 1 \
      --export-weights $R/$m-$prec-ce$ce.safetensors > $R/$m-$prec-ce$ce.txt 2>&1
  done
  cmp $R/$m-$prec-ce0.safetensors $R/$m-$prec-ce1.safetensors && \
    diff <(grep ^step $R/$m-$prec-ce0.txt | sed 's/ tok.s.*//') <(grep ^step $R/$m-$prec-ce1.txt | sed 's/ tok.s.*//') && \
    echo "$m $prec cuda: weights and losses identical with and without the fused loss"
done
rm -f $R/*.safetensors
for mp in llama:bf16 gpt2:bf16; do
  echo "ac-${mp%%:*}-${mp#*:}: $(LOOM_CUDNN=0 timeout 90 python3 test/integration/Inputs/check_recompute.py $LOOM $FIX/${mp%%:*}.dynamic.onnx $FIX/corpus.u16.bin /tmp/ac --backend cuda --precision ${mp#*:} --plan 1 2>&1 | tr '\n' ';' | cut -c1-400)"
done
stamp parity; pack
LOOM_GPU_TEST_OUT=$R/zoo LOOM_GPU_TEST_ZOO_ROWS="bf16 fp32" timeout 120 bash scripts/gpu-test-zoo.sh $B > $R/zoo.txt 2>&1
tail -2 $R/zoo.txt; stamp zoo; rm -rf $R/zoo/*.onnx $R/zoo/*/*.onnx 2>/dev/null; pack
wait
for on in 0 1 0 1; do
  rows=(LOOM_CUDA_ROTARY_ROWS=1); [ $on = 1 ] && rows=() # on: the default rule
  env "${rows[@]}" LOOM_FUSE_CROSS_ENTROPY_GRAD=$on timeout 90 $LOOM train \
    /tmp/s/llama-1b/model.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps 12 \
    --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 --log $R/ab-$on.jsonl > $R/ab-$on.txt 2>&1
  echo "on=$on: $(grep -E '^step ' $R/ab-$on.txt | awk '{printf "%s ", $NF}')"
done
python3 - $R <<'PY'
import json, sys
for f in ('0', '1'):
    steps = [json.loads(l) for l in open(f'{sys.argv[1]}/ab-{f}.jsonl')]
    w = [s for s in steps if 3 <= s['step'] <= 10]
    print(f'on={f}: steps 3-10 of the last run {8192 * len(w) / sum(s["step_s"] for s in w):.0f} tokens/s')
PY
stamp ab; pack
for on in 0 1; do
  rows=(LOOM_CUDA_ROTARY_ROWS=1); [ $on = 1 ] && rows=()
  env "${rows[@]}" LOOM_FUSE_CROSS_ENTROPY_GRAD=$on LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=2 \
    timeout 90 $LOOM train /tmp/s/llama-1b/model.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 \
    --seq 2048 --steps 6 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 > $R/profile-$on.txt 2>&1
  echo "on=$on:"; grep -E "per run in kernels|^  (cross_entropy|rotary|rms_norm)" $R/profile-$on.txt
done
stamp done; pack
