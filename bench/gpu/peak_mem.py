"""Runs a command and records its whole-process peak GPU memory as nvidia-smi sees it (the
CUDA context, the caching allocator's reserve, cuBLAS/cuDNN workspaces: everything the process
holds, unlike an allocator's own figure).

    python3 peak_mem.py OUT.json -- CMD ARGS...

Polls `nvidia-smi --query-compute-apps` every 100 ms for the command's process tree and sums its
processes' used memory. In a container nvidia-smi may report the host's pids, which match
nothing here; then the reading is the GPU's memory.used above what it was before the command
started (the suite runs one thing at a time on the GPU). Writes {"peak_mib", "source",
"samples", "returncode"} to OUT.json. The command's output passes through; its exit status is
peak_mem.py's.

Each sample also reads the GPU's power draw, SM clock and whether its software power cap holds
the clock down; over the samples where the GPU is busy (utilization >= 50%: the steps, not a
compile), OUT.json gets "busy_power_w", "busy_sm_clock_mhz" (means) and "busy_power_capped"
(the fraction with the cap active). A step at the power limit runs at a lower clock, and a
shorter memory-bound kernel that moves the same bytes then buys little (H100, 2026-11-28).
"""
import json
import os
import subprocess
import sys
import time

out, cmd = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]


def tree(root):
    """root and its descendants, from /proc."""
    children = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(pid))
            except OSError:
                pass
    pids, todo = set(), [root]
    while todo:
        p = todo.pop()
        pids.add(p)
        todo += children.get(p, [])
    return pids


def smi(query):
    q = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True,
                       text=True, timeout=5)
    return [line.split(",") for line in q.stdout.strip().splitlines() if line.strip()]


baseline = int(smi("--query-gpu=memory.used")[0][0])
proc = subprocess.Popen(cmd)
peak_tree, peak_gpu, samples = 0, 0, 0
busy = []  # (power W, SM clock MHz, power cap active) while the GPU is busy
while proc.poll() is None:
    try:
        pids = tree(proc.pid)
        used = sum(int(m) for p, m in smi("--query-compute-apps=pid,used_memory") if int(p) in pids)
        gpu = int(smi("--query-gpu=memory.used")[0][0]) - baseline
        peak_tree, peak_gpu, samples = max(peak_tree, used), max(peak_gpu, gpu), samples + 1
    except (subprocess.SubprocessError, ValueError, IndexError):
        pass
    try:  # apart, so that a driver without these fields cannot cost a memory sample
        util, power, clock, cap = smi("--query-gpu=utilization.gpu,power.draw,clocks.sm,"
                                      "clocks_event_reasons.sw_power_cap")[0]
        if float(util) >= 50:
            busy.append((float(power), float(clock), cap.strip() == "Active"))
    except (subprocess.SubprocessError, ValueError, IndexError):
        pass
    time.sleep(0.1)
source = "process tree" if peak_tree else "GPU memory.used above the baseline"
with open(out, "w") as f:
    result = {"peak_mib": peak_tree or peak_gpu, "source": source, "gpu_delta_peak_mib": peak_gpu,
              "samples": samples, "returncode": proc.returncode, "busy_samples": len(busy)}
    if busy:
        result["busy_power_w"] = round(sum(b[0] for b in busy) / len(busy), 1)
        result["busy_sm_clock_mhz"] = round(sum(b[1] for b in busy) / len(busy))
        result["busy_power_capped"] = round(sum(b[2] for b in busy) / len(busy), 3)
    json.dump(result, f)
sys.exit(proc.returncode)
