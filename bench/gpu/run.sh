#!/usr/bin/env bash
# loom beside PyTorch torch.compile, in one call on the GPU machine:
# Llama-3.2-1B shape, B=4, T=2048, bf16 autocast, AdamW.
#
#   bench/gpu/run.sh BUNDLE TORCH_BENCH_PY [STEPS]
#
# BUNDLE is scripts/build-gpu-bundle.sh's folder (a loom that runs without
# MLIR); TORCH_BENCH_PY is the PyTorch anchor (shared/reference/
# torch_bench.py, carried along). Steps:
#   1. export the model in fp32 with random weights (export_llama.py);
#   2. loom train STEPS steps with the CUDA backend (CUDA graph replay);
#      tokens/s is the median over the steps after the first two;
#   3. three more steps with LOOM_CUDA_PROFILE=1: time per opcode;
#   4. torch_bench.py compile 4 2048 on the same GPU;
#   5. attention alone, forward+backward at T=2048 (B=4, 32/8 heads of 64):
#      loom calibrate --attention-only beside attention_bench.py (SDPA);
#   6. one summary line of ratios (tokens/s, MFU, memory, attention).
# MFU uses torch_bench.py's formula (6 N + 6 L H D T FLOPs per token over a
# 989 TFLOP/s peak) for both, so the ratio compares like with like.
set -uo pipefail
BUNDLE=${1:?bundle folder}
TORCH_BENCH=${2:?torch_bench.py}
STEPS=${3:-20}
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
WORK=${LOOM_BENCH_DIR:-/tmp/loom-bench}
mkdir -p "$WORK"
LOOM=$BUNDLE/tools/loom/loom
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

if [ ! -f "$WORK/llama-1b.onnx" ]; then
  timeout 200 python3 bench/gpu/export_llama.py "$WORK" || { echo "bench: export failed"; exit 1; }
fi

run_loom() { # steps log [env...]
  local steps=$1 log=$2
  shift 2
  env "$@" timeout "${LOOM_TIMEOUT:-240}" "$LOOM" train "$WORK/llama-1b.onnx" --backend cuda \
    --data test/fixtures/corpus.u16.bin --batch 4 --seq 2048 --steps "$steps" \
    --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 --log "$log"
}
rm -f "$WORK/loom.jsonl" "$WORK/profile.jsonl"
run_loom "$STEPS" "$WORK/loom.jsonl" 2>&1 | tee "$WORK/loom.txt"
if [ -z "${LOOM_BENCH_NO_PROFILE:-}" ]; then # the per-opcode breakdown (step 3)
  LOOM_TIMEOUT=120 run_loom 2 "$WORK/profile.jsonl" LOOM_CUDA_PROFILE=1 > "$WORK/profile.txt" 2>&1
  grep -A40 "loom cuda profile" "$WORK/profile.txt" || tail -5 "$WORK/profile.txt"
fi

timeout 200 python3 "$TORCH_BENCH" compile 4 2048 2>&1 | tee "$WORK/torch.txt" | tail -3

timeout 120 "$LOOM" calibrate --attention-only 2>&1 | tee "$WORK/loom_attention.txt"
timeout 120 python3 bench/gpu/attention_bench.py 2>&1 | tee "$WORK/torch_attention.txt"

python3 - "$WORK" <<'EOF'
import json, re, statistics, sys
work = sys.argv[1]
rows = [json.loads(l) for l in open(f"{work}/loom.jsonl") if l.strip()]
torch_rows = [json.loads(l) for l in open(f"{work}/torch.txt") if l.startswith("{")]
loom_txt = open(f"{work}/loom.txt").read()
if not rows or not torch_rows:
    print("bench: a run failed; see above"); sys.exit(1)
t = torch_rows[-1]
steady = [r["tokens_per_s"] for r in rows[2:]] or [r["tokens_per_s"] for r in rows]
tok = statistics.median(steady)
N = t["params"]; L, H, D, T = 16, 32, 64, 2048
flops_per_tok = 6 * N + 6 * L * H * D * T
mfu = tok * flops_per_tok / 989e12
mem = re.search(r"device memory: ([0-9.]+) GiB", loom_txt)
mem = float(mem.group(1)) if mem else float("nan")
attn = re.search(r"attention B=4 T= *2048: .*forward\+backward ([0-9.]+) ms", open(f"{work}/loom_attention.txt").read())
sdpa = [json.loads(l) for l in open(f"{work}/torch_attention.txt") if l.startswith("{")]
sdpa = [r for r in sdpa if r["T"] == 2048]
loom_attn = float(attn.group(1)) if attn else float("nan")
sdpa_ms = sdpa[0]["best_fwd_bwd_ms"] if sdpa else float("nan")
print(json.dumps({"loom_tokens_per_s": round(tok), "torch_tokens_per_s": t["tokens_per_s"],
                  "tokens_per_s_ratio": round(tok / t["tokens_per_s"], 4),
                  "loom_mfu_vs_989": round(mfu, 4), "torch_mfu_vs_989": t["mfu_vs_989"],
                  "loom_step_s": round(8192 / tok, 3), "torch_step_s": t["step_s"],
                  "loom_device_mem_gib": mem, "torch_peak_mem_gib": t["peak_mem_gib"],
                  "memory_ratio": round(mem / t["peak_mem_gib"], 3),
                  "loom_attention_fwd_bwd_ms_T2048": loom_attn, "sdpa_fwd_bwd_ms_T2048": sdpa_ms,
                  "attention_speed_ratio": round(sdpa_ms / loom_attn, 3),
                  "loom_final_loss": rows[-1]["loss"], "gpu": t["gpu"]}))
EOF
