"""A server process for the benchmarks: started on a free loopback port, found from the line it
logs (`listening on ... (port N)`), stopped with SIGTERM. One owner for bench/peers.py,
bench/e2e.py and bench/fair_share.py.

    server = ServerProcess("glimpse", ["build/server/glimpse-server", "--listen=127.0.0.1:0",
                                       "--log-level=info"])
    ... use server.address ...
    server.stop()
"""
import re
import subprocess
import sys
import tempfile
import time


class ServerProcess:
    def __init__(self, name, command, env=None, timeout_s=1800):
        """Starts `command` (which must listen on 127.0.0.1:0 and log its port) and waits up to
        timeout_s for its port (a warm-up with no shader cache takes minutes on llvmpipe); exits
        the benchmark with the process's log if it ends or never says."""
        self.name = name
        self.command = list(command)
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"glimpse-bench-{name}-",
                                               suffix=".log")
        self.proc = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env)
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.log_text()
            m = re.search(r"listening on .*\(port (\d+)\)", text)
            if m:
                self.address = f"127.0.0.1:{m.group(1)}"
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit(f"{name} did not start ({' '.join(self.command)}):\n{text}")
            time.sleep(0.05)

    def log_text(self):
        with open(self.log.name) as f:
            return f.read()

    def running(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
