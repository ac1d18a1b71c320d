"""The suite's table from the files bench/gpu/suite.sh leaves in WORK:

    python3 bench/gpu/suite_table.py WORK SHAPE...

One JSON line per shape, then a markdown table. suite.sh runs it after each
shape (into WORK/table.txt, so a call stopped by its time limit still has
the finished shapes' rows) and at the end.
"""
import json, os, re, statistics, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite_models import SHAPES, flops_per_token
work, shapes = sys.argv[1], sys.argv[2:]


def load(path, jsonl=False):
    try:
        with open(path) as f:
            if jsonl:
                return [json.loads(l) for l in f if l.strip().startswith("{")]
            return json.load(f)
    except (OSError, ValueError):
        return None


rows = []
for s in shapes:
    B, T = SHAPES[s]["batch"], SHAPES[s]["seq"]
    r = {"shape": s, "B": B, "T": T}
    steps = load(f"{work}/loom-{s}.jsonl", jsonl=True) or []
    torch_rows = load(f"{work}/torch-{s}.txt", jsonl=True) or []
    t = torch_rows[-1] if torch_rows else {}
    lm, tm = load(f"{work}/loom-{s}.mem.json") or {}, load(f"{work}/torch-{s}.mem.json") or {}
    loom_txt = open(f"{work}/loom-{s}.txt").read() if os.path.exists(f"{work}/loom-{s}.txt") else ""
    if steps:
        # PyTorch's window (torch_suite.py): W warm-up steps, then tokens over
        # the time of the next N (suite.sh's LOOM_BENCH_WARMUP and
        # LOOM_BENCH_TIMED, default 3 and 8). The same here: steps W to W+N-1
        # (fewer if the run was shorter, at least steps 2 on), their tokens
        # over their summed time. Later steps of a run can be slower
        # (llama-1b's steps 6-7 by 8-10% on an H200, 2026-11-28-d: the card
        # reaching its power limit), so a window that stops early flatters.
        warm = int(os.environ.get("LOOM_BENCH_WARMUP", "3"))
        timed = int(os.environ.get("LOOM_BENCH_TIMED", "8"))
        window = [x["tokens_per_s"] for x in steps[warm:warm + timed]] \
            or [x["tokens_per_s"] for x in steps[2:]] or [x["tokens_per_s"] for x in steps]
        tok = len(window) / sum(1.0 / v for v in window)
        r["loom_window_steps"] = len(window)
        r["loom_tokens_per_s"] = round(tok)
        r["loom_step_ms"] = round(B * T / tok * 1e3, 1)
        if t:
            r["loom_mfu"] = round(tok * flops_per_token(s, t["params"]) / 989e12, 4)
    mem = re.search(r"device memory: ([0-9.]+) GiB", loom_txt)
    if mem:
        r["loom_own_mem_gib"] = float(mem.group(1))
    if t:
        r.update(params=t["params"], torch_tokens_per_s=t["tokens_per_s"], torch_step_ms=round(t["step_s"] * 1e3, 1),
                 torch_mfu=t["mfu_vs_989"], torch_allocator_peak_gib=t["peak_mem_gib"], gpu=t["gpu"])
    if lm.get("peak_mib"):
        r["loom_smi_peak_gib"] = round(lm["peak_mib"] / 1024, 2)
    if tm.get("peak_mib"):
        r["torch_smi_peak_gib"] = round(tm["peak_mib"] / 1024, 2)
    r["smi_source"] = lm.get("source", "?")
    for side, m in (("loom", lm), ("torch", tm)):  # the card while busy (peak_mem.py)
        for k in ("busy_power_w", "busy_sm_clock_mhz", "busy_power_capped"):
            if k in m:
                r[f"{side}_{k}"] = m[k]
    if "loom_tokens_per_s" in r and "torch_tokens_per_s" in r:
        r["tokens_per_s_ratio"] = round(r["loom_tokens_per_s"] / r["torch_tokens_per_s"], 3)
    if "loom_smi_peak_gib" in r and "torch_smi_peak_gib" in r:
        r["smi_peak_ratio"] = round(r["loom_smi_peak_gib"] / r["torch_smi_peak_gib"], 3)
    plan = load(f"{work}/plan-{s}.json")
    one = [p for p in (plan or {}).get("plans", []) if p["id"].endswith("ac=none,fp8=off") and p["dp_shard"] == 1
           and p["tp"] == 1 and p["pp"] == 1 and p["cp"] == 1 and p["dp_replicate"] == 1]
    if one:
        r["plan_step_ms"] = round(one[0]["time"]["total"] * 1e3, 1)
        r["plan_mem_gib"] = round(one[0]["memory"]["total"] / 2**30, 2)
        if "loom_step_ms" in r:
            r["plan_time_error"] = round(r["plan_step_ms"] / r["loom_step_ms"] - 1, 4)
        if "loom_own_mem_gib" in r:
            r["plan_mem_error"] = round(r["plan_mem_gib"] / r["loom_own_mem_gib"] - 1, 4)
    rows.append(r)
    print(json.dumps(r))

def f(r, k, fmt="{:.3f}"):
    return fmt.format(r[k]) if k in r else "-"

print()
print("| shape | B x T | loom tok/s | torch.compile tok/s | ratio | MFU loom / torch | nvidia-smi peak GiB loom / torch (ratio) "
      "| loom's own GiB | torch allocator GiB | plan step ms / measured (error) | plan GiB / loom's (error) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['shape']} | {r['B']}x{r['T']} | {f(r, 'loom_tokens_per_s', '{:,}')} | {f(r, 'torch_tokens_per_s', '{:,}')} "
          f"| {f(r, 'tokens_per_s_ratio')} | {f(r, 'loom_mfu')} / {f(r, 'torch_mfu')} "
          f"| {f(r, 'loom_smi_peak_gib', '{:.2f}')} / {f(r, 'torch_smi_peak_gib', '{:.2f}')} ({f(r, 'smi_peak_ratio')}) "
          f"| {f(r, 'loom_own_mem_gib', '{:.2f}')} | {f(r, 'torch_allocator_peak_gib', '{:.2f}')} "
          f"| {f(r, 'plan_step_ms', '{:.1f}')} / {f(r, 'loom_step_ms', '{:.1f}')} ({f(r, 'plan_time_error', '{:+.1%}')}) "
          f"| {f(r, 'plan_mem_gib', '{:.2f}')} / {f(r, 'loom_own_mem_gib', '{:.2f}')} ({f(r, 'plan_mem_error', '{:+.1%}')}) |")
