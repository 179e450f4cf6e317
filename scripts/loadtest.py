#!/usr/bin/env python3
"""Load test for `agent-exec serve` (Python standard library only).

Starts a daemon on a private socket with a small policy, sends --requests
run_shell calls from --clients concurrent connections, and checks:

  * every request got exactly one answer, matched by id;
  * no zombie child of the daemon and no orphaned command remains;
  * the daemon's open file descriptors are the same before and after.

Reports throughput and p50/p99 latency. Exit status 1 when a check fails.

    cargo build --release
    scripts/loadtest.py --binary target/release/agent-exec --requests 10000 --clients 32
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

POLICY = """
name = "loadtest"
default = "deny"

[[rule]]
id = "echo"
action = "allow"
risk = "low"
reason = "prints its arguments"
program = "echo"
read_only = true
"""


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def children_of(pid):
    """(pid, state) of every process whose parent is `pid`."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        if int(rest[1]) == pid:
            out.append((int(name), rest[0]))
    return out


def is_reaper(pid):
    """The daemon's own helper that outlives it to clean up after a crash."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return b"--reap-for" in f.read()
    except OSError:
        return False


def with_marker(marker):
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(name))
        except OSError:
            continue
    return pids


def wait_for_socket(path, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit("daemon exited with %s" % proc.returncode)
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("daemon did not start")


def client_worker(path, ids, marker, latencies, answers, errors):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        f = s.makefile("rb")
        for i in ids:
            req = {"id": i, "tool": "run_shell", "args": {"command": "echo %s-%d" % (marker, i)}}
            t0 = time.perf_counter()
            s.sendall(json.dumps(req).encode() + b"\n")
            line = f.readline()
            latencies.append(time.perf_counter() - t0)
            if not line:
                errors.append("connection closed before answer %d" % i)
                return
            answers.append(json.loads(line))
        s.close()
    except OSError as e:
        errors.append("client error: %s" % e)


def percentile(values, p):
    if not values:
        return 0.0
    values = sorted(values)
    k = min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))
    return values[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default="target/release/agent-exec")
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--max-concurrent", type=int, default=None)
    ap.add_argument("--queue", type=int, default=64)
    a = ap.parse_args()

    binary = shutil.which(a.binary) or a.binary
    work = tempfile.mkdtemp(prefix="agent-exec-load-")
    os.chmod(work, 0o755)
    run_dir = os.path.join(work, "run")
    os.mkdir(run_dir, 0o700)
    root = os.path.join(work, "root")
    os.mkdir(root)
    policy = os.path.join(work, "policy.toml")
    with open(policy, "w") as f:
        f.write(POLICY)
    sock = os.path.join(run_dir, "agent-exec.sock")
    cmd = [binary, "serve", "--policy", policy, "--root", root, "--socket", sock,
           "--state", os.path.join(run_dir, "state"), "--queue", str(a.queue)]
    if a.max_concurrent:
        cmd += ["--max-concurrent", str(a.max_concurrent)]
    log = open(os.path.join(work, "daemon.log"), "wb")
    env = dict(os.environ, RUST_LOG="warn")
    daemon = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env)
    failures = []
    try:
        wait_for_socket(sock, daemon)
        # A warm-up at full concurrency, so files the daemon opens lazily and
        # keeps (state db, traces, the sandbox's pool of reusable run
        # cgroups, which grows with concurrency) are in the baseline rather
        # than counted as a leak.
        warm_ids = [list(range(-1 - c, -1 - 20 * a.clients, -a.clients)) for c in range(a.clients)]
        warm_threads = [threading.Thread(target=client_worker,
                                         args=(sock, ids, "warmup", [], [], failures))
                        for ids in warm_ids]
        for t in warm_threads:
            t.start()
        for t in warm_threads:
            t.join()
        time.sleep(0.5)
        fds_before = fd_count(daemon.pid)

        marker = "load%d" % os.getpid()
        per_client = [list(range(c, a.requests, a.clients)) for c in range(a.clients)]
        latencies, answers, errors = [], [], []
        threads = [threading.Thread(target=client_worker,
                                    args=(sock, ids, marker, latencies, answers, errors))
                   for ids in per_client]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        failures.extend(errors)

        seen = {}
        for ans in answers:
            seen[ans.get("id")] = seen.get(ans.get("id"), 0) + 1
        missing = [i for i in range(a.requests) if seen.get(i, 0) == 0]
        doubled = [i for i, n in seen.items() if n > 1]
        if missing:
            failures.append("%d requests got no answer (first: %s)" % (len(missing), missing[:5]))
        if doubled:
            failures.append("%d requests got more than one answer" % len(doubled))
        by_type = {}
        for ans in answers:
            by_type[ans.get("error_type") or "ok"] = by_type.get(ans.get("error_type") or "ok", 0) + 1

        time.sleep(0.5)
        fds_after = fd_count(daemon.pid)
        children = [(p, st) for p, st in children_of(daemon.pid) if not is_reaper(p)]
        zombies = [p for p, st in children if st == "Z"]
        leftovers = [p for p, st in children if st != "Z"]
        orphans = with_marker(marker)
        if fds_after != fds_before:
            failures.append("daemon fds: %d before, %d after" % (fds_before, fds_after))
        if zombies:
            failures.append("zombie children of the daemon: %s" % zombies)
        if leftovers:
            failures.append("children of the daemon still running: %s" % leftovers)
        if orphans:
            failures.append("commands still running after the load: %s" % orphans)

        print(json.dumps({
            "requests": a.requests,
            "clients": a.clients,
            "answers": len(answers),
            "outcomes": by_type,
            "seconds": round(elapsed, 3),
            "throughput_rps": round(len(answers) / elapsed, 1) if elapsed else None,
            "latency_ms_p50": round(percentile(latencies, 50) * 1000, 2),
            "latency_ms_p99": round(percentile(latencies, 99) * 1000, 2),
            "daemon_fds_before": fds_before,
            "daemon_fds_after": fds_after,
        }, indent=2))
    finally:
        daemon.terminate()
        try:
            rc = daemon.wait(timeout=30)
            if rc != 0:
                failures.append("daemon exited %s after SIGTERM" % rc)
        except subprocess.TimeoutExpired:
            daemon.kill()
            failures.append("daemon did not stop after SIGTERM")
        log.close()
        if os.path.exists(sock):
            failures.append("socket left behind after shutdown")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    if failures:
        print("daemon log: %s" % os.path.join(work, "daemon.log"), file=sys.stderr)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("loadtest passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
