#!/bin/bash
# call 3 (thirteenth session): sibling input gradients as one GEMM (joinSiblingInputGradients, column
# blocks): CUDA kernel tests (CudaBackend.ColumnBlocksJoinSiblingGemms among them); the llama and
# qwen2 fixtures' bf16 curves with the join (LOOM_FOLD_ATTENTION_TRANSPOSES=0, where the tiny
# fixtures keep AdamW's copies); per-opcode profiles and graph replays of llama-1b and
# qwen2.5-1.5b with the join off and on.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; W=/tmp/loom-suite; rm -rf $R; mkdir -p $R $W; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call3: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { cp $W/*.txt $R/ 2>/dev/null; tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; }
for s in llama-1b qwen2.5-1.5b; do
  mkdir -p $W/$s; (timeout 300 python3 bench/gpu/export_model.py $s $W/$s > $W/export-$s.txt 2>&1) &
done
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*:CertifiedActivations.*:AdamWGroups.*:ColumnBlocks.*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]|ColumnBlocks" $R/unit.txt | head -20
stamp unit; pack
for m in llama qwen2; do
  LOOM_FOLD_ATTENTION_TRANSPOSES=0 $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 50 \
    --batching fixture --warmup 5 --precision bf16 --init-weights $FIX/$m.init.safetensors --print-program-stats \
    --log $R/curve-$m-joined.jsonl > $R/curve-$m-joined.txt 2>&1
  echo "curve-$m-joined: $(grep -oE 'column blocks' $R/curve-$m-joined.txt | head -1) $(python3 test/integration/Inputs/check_curve.py $R/curve-$m-joined.jsonl $FIX/reference.json $m bf16 --max-loss-diff 2e-2 --skip-unstable 2e-2)"
done
stamp curves; pack
wait; stamp exports
prof() { # model batch seq tag [env...]
  local m=$1 b=$2 t=$3 tag=$4; shift 4
  env "$@" LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=2 timeout 120 $LOOM train $W/$m/model.onnx \
    --backend cuda --data $FIX/corpus.u16.bin --batch $b --seq $t --steps 6 --precision bf16 --lr 1e-4 --warmup 0 \
    --print-every 1 --print-program-stats > $R/profile-$m-$tag.txt 2>&1
  echo "$m $tag: $(grep -E '^program' $R/profile-$m-$tag.txt) | $(grep -E 'per run in kernels' $R/profile-$m-$tag.txt | cut -c1-90)"
  grep -E '^  (matmul f32|matmul bf16|swiglu_grad|adamw) ' $R/profile-$m-$tag.txt | sed "s/^/    /"
  grep -E 'tB bf16,bf16->f32' $R/profile-$m-$tag.txt | sed "s/^/    /"
  grep -E 'step 5 loss|error|invalid' $R/profile-$m-$tag.txt | sed "s/^/    /"
}
prof llama-1b 4 2048 apart LOOM_JOIN_SIBLING_GRADS=0
prof llama-1b 4 2048 joined
prof qwen2.5-1.5b 4 2048 apart LOOM_JOIN_SIBLING_GRADS=0
prof qwen2.5-1.5b 4 2048 joined; pack
for tag in apart joined apart joined; do
  j=1; [ $tag = apart ] && j=0
  LOOM_JOIN_SIBLING_GRADS=$j LOOM_CUDA_GRAPH_TIMING=1 LOOM_CUDA_PROFILE_FROM=3 timeout 120 $LOOM train $W/llama-1b/model.onnx \
    --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps 12 --precision bf16 --lr 1e-4 --warmup 0 \
    --print-every 1 > $R/graph-llama-1b-$tag.txt 2>&1
  echo "llama-1b graph $tag: $(grep -E 'graph timing' $R/graph-llama-1b-$tag.txt | cut -c1-140) | $(grep -oE 'arena [0-9.]+ MiB' $R/graph-llama-1b-$tag.txt)"
done
stamp graphs; pack
