#!/usr/bin/env bash
# Activation checkpointing on the GPU, in one call on the GPU machine:
# Llama-3.2-1B shape, T=2048, bf16 autocast, AdamW (issue 16, criteria 2, 3).
#
#   bench/gpu/ac.sh BUNDLE [STEPS]
#
# BUNDLE is scripts/build-gpu-bundle.sh's folder. Steps, in this order so
# that what matters most runs first (the whole script fits in ~9 minutes;
# the last step is skipped when time runs short and says so):
#   1. export the model (export_llama.py; skipped when already there);
#   2. loom train at B=4 with --ac none, selective and full: tokens/s
#      (median after the first two steps), the device memory loom
#      allocates (its whole footprint: arena, constants, scratch, GEMM
#      workspace) and the peak nvidia-smi saw (CUDA context included);
#   3. loom plan at B=4: the predicted memory and tokens/s of each policy
#      (the compiled step's buffer plan with the policy applied);
#   4. torch_ac_bench.py at B=AC_BENCH_B (default 12): torch.compile without
#      checkpointing (expected to run out of memory there) and with
#      torchtitan's op-level selective checkpointing;
#   5. loom at that B with --ac selective, and with --ac budget at the
#      memory PyTorch's selective run took (max_memory_allocated);
#   6. the largest B each policy fits: loom plan's buffer plan (the
#      profile's 78 GiB usable of 80 GB) at B=4 and 8 predicts it, plans
#      around it settle it, then a short loom run at each largest B
#      confirms it allocates and trains;
#   7. one JSON line: every figure and the ratios the issue asks for.
# LOOM_BENCH_PROFILE names the planner's GPU (default h100; a profile file
# such as planner/profiles/h200.calibrated.json on an H200);
# AC_BENCH_SKIP_LARGEST=1 skips step 6 (on a 141 GB H200 the largest B are
# long runs).
set -uo pipefail
BUNDLE=${1:?bundle folder}
STEPS=${2:-8}
BIG=${AC_BENCH_B:-12}
MAXB=${AC_BENCH_MAX_B:-128} # the largest B searched
PROFILE=${LOOM_BENCH_PROFILE:-h100}
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
WORK=${LOOM_BENCH_DIR:-/tmp/loom-bench}
OUT=$WORK/ac
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl "$OUT"/*.txt "$OUT"/*.json
LOOM=$BUNDLE/tools/loom/loom
MODEL=$WORK/llama-1b.onnx
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

if [ ! -f "$MODEL" ]; then
  timeout 200 python3 bench/gpu/export_llama.py "$WORK" || { echo "ac: export failed"; exit 1; }
fi

# loom_run NAME B STEPS [loom flags...]: stdout in NAME.txt, steps in
# NAME.jsonl, nvidia-smi's peak (MiB) in NAME.smi.
loom_run() {
  local name=$1 b=$2 steps=$3
  shift 3
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$OUT/$name.smi.log" &
  local smi=$!
  timeout "${LOOM_TIMEOUT:-150}" "$LOOM" train "$MODEL" --backend cuda --data test/fixtures/corpus.u16.bin \
    --batch "$b" --seq 2048 --steps "$steps" --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 \
    --log "$OUT/$name.jsonl" "$@" > "$OUT/$name.txt" 2>&1
  local st=$?
  kill "$smi" 2> /dev/null
  wait "$smi" 2> /dev/null
  sort -n "$OUT/$name.smi.log" | tail -1 > "$OUT/$name.smi"
  echo "ac: $name (B=$b $*): exit $st; $(grep -E 'device memory|recompute:|error' "$OUT/$name.txt" | tr '\n' ' ')"
}

# 2. B=4, each policy.
for ac in none selective full; do loom_run "b4-$ac" 4 "$STEPS" --ac "$ac"; done

# 3. The planner's prediction at B=4.
plan_json() { # B -> $OUT/plan-B.json
  [ -f "$OUT/plan-$1.json" ] || timeout 120 "$LOOM" plan "$MODEL" --gpus 1 --gpu "$PROFILE" --batch "$1" --seq 2048 \
    --precision bf16 --json --top 10 --rejected 10 > "$OUT/plan-$1.json" 2> "$OUT/plan-$1.err"
}
plan_json 4

# 4. PyTorch at B=BIG: no checkpointing, then torchtitan's selective policy.
timeout 300 python3 bench/gpu/torch_ac_bench.py "$BIG" 2048 --policies none,selective --steps "$STEPS" \
  2>&1 | tee "$OUT/torch.txt" | grep '^{'

# 5. loom at B=BIG: selective, and the budget policy at PyTorch's memory.
loom_run "big-selective" "$BIG" "$STEPS" --ac selective
TORCH_GIB=$(python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
sel = [r for r in rows if r['policy'] == 'selective' and not r['oom']]
print(sel[0]['peak_mem_gib'] if sel else '')" "$OUT/torch.txt")
if [ -n "$TORCH_GIB" ]; then
  loom_run "big-budget" "$BIG" "$STEPS" --ac budget --ac-memory-budget "$TORCH_GIB"
else
  echo "ac: no PyTorch selective run to take the budget from; --ac budget skipped"
fi

# 6. The largest B per policy. Memory is linear in B (state plus B times
# the activations), so two buffer plans (B=4, 8) predict the largest B that
# fits the profile's usable memory; plans at that B and its neighbours
# settle it (each plan compiles the step: seconds, not a bisection from 128).
fits() { # B policy -> exit 0 when loom plan finds the policy's step fits
  plan_json "$1"
  python3 - "$OUT/plan-$1.json" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = [p for p in d["plans"] if p["checkpoint"] == sys.argv[2] and not p["fp8"] and p["memory_source"] == "buffer-plan"]
sys.exit(0 if ok else 1)
PY
}
[ "${AC_BENCH_SKIP_LARGEST:-0}" = 1 ] || plan_json 8
for ac in none selective full; do
  [ "${AC_BENCH_SKIP_LARGEST:-0}" = 1 ] && { echo "ac: largest B skipped (AC_BENCH_SKIP_LARGEST=1)"; break; }
  b=$(python3 - "$OUT/plan-4.json" "$OUT/plan-8.json" "$ac" "$MAXB" <<'PY'
import json, sys
def mem(path):
    d = json.load(open(path))
    e = [p for p in d["plans"] + d["rejected"] if p["checkpoint"] == sys.argv[3] and not p["fp8"]][0]
    return e["memory"]["total"], d["profile"]["usable_memory"]
(m4, usable), (m8, _) = mem(sys.argv[1]), mem(sys.argv[2])
per = (m8 - m4) / 4
b = int((usable - (m4 - 4 * per)) // per) if per > 0 else 4
print(min(max(1, b), int(sys.argv[4])))
PY
)
  if fits "$b" "$ac"; then
    while [ "$b" -lt "$MAXB" ] && fits $((b + 1)) "$ac"; do b=$((b + 1)); done
  else
    while [ "$b" -gt 1 ] && ! fits "$b" "$ac"; do b=$((b - 1)); done
  fi
  echo "$ac $b" >> "$OUT/largest.txt"
  echo "ac: largest B for --ac $ac by the buffer plan: $b"
done
while read -r ac b; do
  if [ "$SECONDS" -lt 450 ] && [ "$b" -gt 0 ]; then
    loom_run "max-$ac" "$b" 4 --ac "$ac"
  else
    echo "ac: short run at the largest B for --ac $ac skipped (${SECONDS}s elapsed)"
  fi
done < <(cat "$OUT/largest.txt" 2> /dev/null)

# 7. Summary.
python3 - "$OUT" "$BIG" <<'EOF'
import glob, json, os, re, statistics, sys
out, big = sys.argv[1], int(sys.argv[2])
GiB = 2**30

def loom(name):
    p = f"{out}/{name}.txt"
    if not os.path.exists(p):
        return None
    txt = open(p).read()
    rows = [json.loads(l) for l in open(f"{out}/{name}.jsonl")] if os.path.exists(f"{out}/{name}.jsonl") else []
    mem = re.search(r"device memory: ([0-9.]+) GiB", txt)
    smi = open(f"{out}/{name}.smi").read().strip() if os.path.exists(f"{out}/{name}.smi") else ""
    steady = [r["tokens_per_s"] for r in rows[2:]] or [r["tokens_per_s"] for r in rows]
    r = {"ok": bool(rows), "device_mem_gib": float(mem.group(1)) if mem else None,
         "smi_peak_gib": round(float(smi) / 1024, 2) if smi else None}
    if steady:
        tok = statistics.median(steady)
        b = int(re.search(r"batch ([0-9]+) x seq", txt).group(1))
        r.update({"tokens_per_s": round(tok), "step_s": round(b * 2048 / tok, 4)})
    if not rows:
        err = [l for l in txt.splitlines() if "error" in l]
        r["error"] = err[0][:300] if err else txt.strip().splitlines()[-1:]
    return r

def plan(b, policy):
    p = f"{out}/plan-{b}.json"
    if not os.path.exists(p) or not os.path.getsize(p):
        return None
    d = json.load(open(p))
    for e in d["plans"] + d.get("rejected", []):
        if e["checkpoint"] == policy and not e["fp8"]:
            return {"mem_gib": round(e["memory"]["total"] / GiB, 2), "source": e["memory_source"],
                    "tokens_per_s": round(e["tokens_per_s"]), "step_s": round(e["time"]["total"], 4)}
    return None

res = {"b4": {}, "largest_b": {}, f"b{big}": {}}
for ac in ("none", "selective", "full"):
    r = loom(f"b4-{ac}") or {}
    pl = plan(4, ac)
    r["plan"] = pl
    if pl and r.get("device_mem_gib"):
        r["mem_vs_plan"] = round(r["device_mem_gib"] / pl["mem_gib"], 4)
    res["b4"][ac] = r
n, f = res["b4"]["none"].get("step_s"), res["b4"]["full"].get("step_s")
s = res["b4"]["selective"].get("step_s")
res["full_vs_none_step_time"] = round(f / n, 3) if n and f else None
res["selective_vs_none_step_time"] = round(s / n, 3) if n and s else None
if os.path.exists(f"{out}/largest.txt"):
    for line in open(f"{out}/largest.txt"):
        ac, b = line.split()
        res["largest_b"][ac] = {"B": int(b), "plan": plan(int(b), ac), "run": loom(f"max-{ac}")}
torch_rows = [json.loads(l) for l in open(f"{out}/torch.txt") if l.startswith("{")] if os.path.exists(f"{out}/torch.txt") else []
tb = res[f"b{big}"]
for r in torch_rows:
    tb[f"torch_{r['policy']}"] = r
tb["loom_selective"] = loom("big-selective")
tb["loom_budget"] = loom("big-budget")
ts = tb.get("torch_selective")
for k in ("loom_selective", "loom_budget"):
    l = tb.get(k)
    if ts and not ts.get("oom") and l and l.get("tokens_per_s"):
        tb[k + "_vs_torch_tokens"] = round(l["tokens_per_s"] / ts["tokens_per_s"], 3)
        tb[k + "_vs_torch_memory"] = round(l["device_mem_gib"] / ts["peak_mem_gib"], 3) if l.get("device_mem_gib") else None
print(json.dumps(res))
EOF
echo "ac: ${SECONDS}s"
