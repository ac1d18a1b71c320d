#!/usr/bin/env python3
# Starts `loom train ... --nproc N`, waits until it has printed step 3,
# then hurts one rank and checks that the whole job ends in bounded time
# with an error naming that rank and leaves no loom process behind.
#
#   rank_fault.py kill|stop RANK LOOM [loom train arguments...]
#
# kill: SIGKILL the rank (a crash). stop: SIGSTOP it (a hang: the others
# must give up at their --collective-timeout). Prints one PASS/FAIL line
# with the seconds from the fault to the launcher's exit; exits 1 on FAIL.
import os
import signal
import subprocess
import sys
import time

LIMIT_S = 60


def children(pid):
    """Processes whose parent is `pid` (from /proc)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                kids.append(int(entry))
        except OSError:
            pass
    return kids


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for var in f.read().split(b"\0"):
                if var.startswith(b"RANK="):
                    return int(var[5:])
    except OSError:
        pass
    return -1


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main():
    mode, victim_rank, loom = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    job = subprocess.Popen([loom, "train"] + sys.argv[4:], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    start = time.time()
    for line in job.stdout:
        if line.startswith("step 3 "):
            break
        if time.time() - start > LIMIT_S:
            break
    kids = children(job.pid)
    victims = [k for k in kids if rank_of(k) == victim_rank]
    if not victims:
        job.kill()
        print(f"FAIL: no process of rank {victim_rank} among {kids}")
        return 1
    fault = time.time()
    os.kill(victims[0], signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
    try:
        _, err = job.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        job.kill()
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
        print(f"FAIL: the job still ran {LIMIT_S} s after the fault")
        return 1
    took = time.time() - fault
    sys.stderr.write(err)
    left = [k for k in kids if alive(k)]
    if left:
        print(f"FAIL: processes {left} still running after the launcher exited")
        return 1
    if job.returncode == 0:
        print("FAIL: the job exited 0")
        return 1
    print(f"PASS: {mode} of rank {victim_rank}: job ended {took:.1f} s later with exit status "
          f"{job.returncode}, no process left")
    return 0


sys.exit(main())
