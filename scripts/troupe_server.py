"""A `troupe serve` process for the benchmark scripts: started on a free
port, waited for until ready, stopped with SIGTERM."""
import re
import signal
import subprocess


def start(args):
    """Runs `args` (a troupe serve command line, with --port 0); returns
    (process, port) once it says ready."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    for line in p.stdout:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "ready:" in line:
            return p, port
    raise RuntimeError("troupe serve exited")


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)
