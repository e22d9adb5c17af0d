#!/usr/bin/env python3
"""Where one end-to-end row's CPU goes: N callers send the row's request (bench/e2e.py's rows and
images) to a fresh glimpse-server, or to the grpcio + OpenCV peer (--peer), for a few seconds;
prints the rate, how idle the machine was, the server's and the client's CPU per call, and the
server's CPU per call by thread name (/proc/PID/task: Glimpse's decoders are "glimpse-host", its
GL thread "glimpse-gpu", llvmpipe's workers "gl-driver", gRPC's its own names).

    LP_NUM_THREADS=2 build/python-venv/bin/python bench/cpu_by_thread.py \\
        --server-binary build/server/glimpse-server --row "histogram 1080p JPEG" [--peer] \\
        [--callers 4] [--seconds 8] [-- SERVER_FLAGS...]
"""
import argparse
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402
from server_process import ServerProcess  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def machine():
    """(all jiffies, idle + iowait jiffies) from /proc/stat."""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v), v[3] + v[4]


def cpu_s(stat_path):
    """User + system CPU seconds of a process or thread from its stat file."""
    fields = open(stat_path).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def threads(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            out[(name, tid)] = cpu_s(f"/proc/{pid}/task/{tid}/stat")
        except OSError:  # the thread ended
            pass
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--server-binary", default="build/server/glimpse-server")
    p.add_argument("--row", required=True, help="a regular expression matching one e2e row name")
    p.add_argument("--peer", action="store_true", help="measure the grpcio + OpenCV peer instead")
    p.add_argument("--callers", type=int, default=4)
    p.add_argument("--seconds", type=float, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("server_flags", nargs="*", help="more glimpse-server flags (after --)")
    args = p.parse_args()
    rows = [r for r in e2e.ROWS if re.search(args.row, r.name)]
    if len(rows) != 1:
        raise SystemExit(f"--row must match one row, matched {[r.name for r in rows]}")
    row = rows[0]
    inp = e2e.make_inputs(args.seed)[row.input]()
    caller = e2e.Caller(row.analyses(inp.pixels), inp.ref, row.analyze)
    here = os.path.dirname(os.path.abspath(__file__))
    if args.peer:
        server = ServerProcess("peer", [sys.executable, os.path.join(here, "e2e_peer.py")])
    else:
        server = ServerProcess("glimpse", [args.server_binary, "--listen=127.0.0.1:0",
                                           "--log-level=info",
                                           f"--max-message-bytes={e2e.MAX_MESSAGE_BYTES}",
                                           *args.server_flags])
    try:
        stubs = [caller.method(e2e.channel(server.address, True)) for _ in range(args.callers)]
        for stub in stubs:
            caller(stub)  # each connection's first call, uncounted
        stop = time.monotonic() + args.seconds
        counts = [0] * args.callers

        def work(i):
            while time.monotonic() < stop:
                caller(stubs[i])
                counts[i] += 1

        pid = server.proc.pid
        th0, m0, s0, c0 = threads(pid), machine(), cpu_s(f"/proc/{pid}/stat"), cpu_s(
            "/proc/self/stat")
        t0 = time.monotonic()
        workers = [threading.Thread(target=work, args=(i,)) for i in range(args.callers)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        t1 = time.monotonic()
        th1, m1, s1, c1 = threads(pid), machine(), cpu_s(f"/proc/{pid}/stat"), cpu_s(
            "/proc/self/stat")
    finally:
        server.stop()
    n = sum(counts)
    idle = 100 * (m1[1] - m0[1]) / max(1, m1[0] - m0[0])
    print(f"{row.name}, {'peer' if args.peer else 'glimpse'}, {args.callers} callers: "
          f"{n / (t1 - t0):.2f} req/s, machine idle {idle:.1f}%, server CPU "
          f"{1e3 * (s1 - s0) / n:.2f} ms/call, client CPU {1e3 * (c1 - c0) / n:.2f} ms/call")
    by_name = {}
    for key, seconds in th1.items():
        by_name[key[0]] = by_name.get(key[0], 0) + seconds - th0.get(key, 0)
    print("  server CPU by thread name, ms/call: " + ", ".join(
        f"{name} {1e3 * s / n:.1f}" for name, s in sorted(by_name.items(), key=lambda x: -x[1])
        if s > 0))


if __name__ == "__main__":
    main()
