#!/usr/bin/env python3
# Runs one rank of a multi-process job by hand, as an external launcher
# would, with a free MASTER_PORT on 127.0.0.1:
#
#   run_rank.py RANK WORLD_SIZE LOOM [arguments...]
import os
import socket
import sys

rank, world, loom = sys.argv[1], sys.argv[2], sys.argv[3]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(RANK=rank, WORLD_SIZE=world, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
sys.stdout.flush()
os.execvp(loom, [loom] + sys.argv[4:])
