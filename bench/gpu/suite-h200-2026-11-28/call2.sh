#!/bin/bash
# call 2: tokens-major attention (the default) against heads-major with its transposes
# (LOOM_FOLD_ATTENTION_TRANSPOSES=0), the same binary in one call, graph mode as the suite runs
# loom; then where llama-1b's step goes (LOOM_CUDA_PROFILE=1: per opcode and the non-GEMM kernels
# by operand shapes). nvidia-smi samples power and SM clock every 200 ms.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; D=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$D/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; W=/tmp/loom-suite; mkdir -p $R $W; T0=$(date +%s)
stamp() { echo "call2: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
( while sleep 15; do tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; done ) &
nvidia-smi --query-gpu=timestamp,power.draw,power.limit,clocks.sm,clocks_event_reasons.sw_power_cap,utilization.gpu \
  --format=csv,noheader -lms 200 > $R/smi.csv 2>&1 &
for s in llama-1b qwen3-1.7b; do python3 bench/gpu/export_model.py $s $W/$s > $R/export-$s.txt 2>&1 & done
wait_export() { while [ ! -f $W/$1/model.onnx ] && pgrep -f "export_model.py $1" > /dev/null; do sleep 2; done; sleep 3; }
run() { # FOLD SHAPE B T N
  echo "fold=$1 $2 run $5 start $(date +%s.%N)" >> $R/marks.txt
  LOOM_FOLD_ATTENTION_TRANSPOSES=$1 timeout 150 $D/tools/loom/loom train $W/$2/model.onnx --backend cuda \
    --data test/fixtures/corpus.u16.bin --batch $3 --seq $4 --steps 10 --precision bf16 --lr 1e-4 --warmup 0 \
    --print-every 1 > $R/fold$1-$2-$5.txt 2>&1
  echo "fold=$1 $2 run $5 end $(date +%s.%N)" >> $R/marks.txt
  echo "fold=$1 $2 #$5: $(grep -o 'tok/s [0-9]*' $R/fold$1-$2-$5.txt | tail -8 | awk '{print $2}' | sort -n | sed -n 4,5p | tr '\n' ' ')"
}
wait_export llama-1b; stamp "llama-1b exported"
run 0 llama-1b 4 2048 1; run 1 llama-1b 4 2048 1; stamp "llama-1b a/b"
LOOM_CUDA_PROFILE=1 timeout 150 $D/tools/loom/loom train $W/llama-1b/model.onnx --backend cuda --data test/fixtures/corpus.u16.bin \
  --batch 4 --seq 2048 --steps 2 --precision bf16 --lr 1e-4 --warmup 0 > $R/profile-llama-1b.txt 2>&1; stamp "llama-1b profile"
wait_export qwen3-1.7b; stamp "qwen3-1.7b exported"
run 0 qwen3-1.7b 4 2048 1; run 1 qwen3-1.7b 4 2048 1; stamp "qwen3-1.7b a/b"
kill %2 2>/dev/null; sleep 1
tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz
