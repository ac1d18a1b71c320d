#!/bin/bash
# call 4 (thirteenth session): the session's head (small AdamWs grouped; sibling input gradients
# joined over column blocks, whether the step keeps AdamW's copies or casts; stores mapped by
# multiply and shift): CUDA kernel tests, the fixtures' gradients and curves (the joined default
# step), a per-opcode profile of llama-1b, then the suite beside torch.compile for llama-1b and
# qwen2.5-1.5b (20 warm-up steps, 10 timed), priced with the shipped H200 profile.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; W=/tmp/loom-suite; rm -rf $R; mkdir -p $R $W; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call4: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { cp $W/*.txt $W/*.json $W/*.jsonl $R/ 2>/dev/null; tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
for s in llama-1b qwen2.5-1.5b; do
  mkdir -p $W/$s; (timeout 300 python3 bench/gpu/export_model.py $s $W/$s > $W/export-$s.txt 2>&1) &
done
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*:CertifiedActivations.*:AdamWGroups.*:ColumnBlocks.*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt | head -20
stamp unit
for m in llama qwen2 gpt2; do
  $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 1 \
    --batching fixture --init-weights $FIX/$m.init.safetensors --expect-grads $FIX/$m.grads0.npz > $R/grads-$m.txt 2>&1
  echo "grads-$m: exit $? $(grep -E 'step-0 gradients' $R/grads-$m.txt)"
  for prec in fp32 bf16; do
    bound=2e-3 extra=(--grad-norm-rel 0.01); [ $prec = bf16 ] && bound=2e-2 extra=(--skip-unstable 2e-2)
    $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 50 \
      --batching fixture --warmup 5 --precision $prec --init-weights $FIX/$m.init.safetensors --print-program-stats \
      --log $R/curve-$m-$prec.jsonl > $R/curve-$m-$prec.txt 2>&1
    echo "curve-$m-$prec: $(grep -oE '[0-9]+ column blocks' $R/curve-$m-$prec.txt) $(python3 test/integration/Inputs/check_curve.py $R/curve-$m-$prec.jsonl $FIX/reference.json $m $prec --max-loss-diff $bound "${extra[@]}")"
  done
done
stamp parity; pack
wait; stamp exports
LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=2 timeout 120 $LOOM train $W/llama-1b/model.onnx \
  --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps 6 --precision bf16 --lr 1e-4 --warmup 0 \
  --print-every 1 --print-program-stats > $R/profile-llama-1b.txt 2>&1
echo "llama-1b: $(grep -E '^program' $R/profile-llama-1b.txt) | $(grep -E 'per run in kernels' $R/profile-llama-1b.txt | cut -c1-90)"
grep -E '^  (matmul f32|swiglu_grad|adamw) |small adamw|adamw:' $R/profile-llama-1b.txt | sed "s/^/    /"
stamp profile; pack
LOOM_BENCH_WARMUP=20 LOOM_BENCH_TIMED=10 LOOM_BENCH_PROFILE=planner/profiles/h200.calibrated.json \
  LOOM_BENCH_CUDA_PROFILE=0 LOOM_BENCH_DIR=$W timeout 400 bash bench/gpu/suite.sh $B llama-1b qwen2.5-1.5b > $R/suite.txt 2>&1 &
SP=$!
while kill -0 $SP 2>/dev/null; do sleep 15; pack; done
stamp suite; pack
grep -vE "^\s*$" $R/suite.txt | tail -12
