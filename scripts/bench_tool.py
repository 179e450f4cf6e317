#!/usr/bin/env python3
"""Measurement and reporting helpers for scripts/bench-*.sh.

Standard library only. Each subcommand writes its raw numbers as JSON (the
chart and BENCHMARKS.md are built from those files) and prints a Markdown
table. Every figure is reported next to its baseline from the same run,
because on a small shared machine only same-run ratios are comparable.

  machine                                   host description (JSON)
  hyperfine GROUP BASELINE OUT PASS.json..  combine hyperfine passes
  client-table OUT FILE..                   table of bench_client JSON files
  policy-copy SRC DST TABLE.KEY=VALUE..     copy a policy, overriding keys
  output ...                                1 GB drain and hard-cap stop
  timeout ...                               timeout precision and survivors
  rounds --runs N --out F NAME=CMD..        shuffled rounds, each rung over the last
  phases --out F NAME=FILE..                medians of `one_shot --times` phases
  report DIR                                targets: met / missed, from DIR
"""

import argparse
import json
import os
import platform
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def pct(xs, p):
    """Nearest-rank percentile."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    rank = max(1, min(len(s), int(-(-p * len(s) // 100))))
    return s[rank - 1]


def fmt_ms(x):
    if x != x:  # NaN
        return "n/a"
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


# ---------------------------------------------------------------------------
# machine


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    landlock = None
    try:
        # The ABI version is only visible through the syscall; the LSM list
        # at least says whether Landlock is on.
        with open("/sys/kernel/security/lsm", encoding="utf-8") as f:
            landlock = "landlock" in f.read()
    except OSError:
        pass
    cg = "v2" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "v1/hybrid"
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "landlock_lsm": landlock,
        "cgroup": cg,
    }


# ---------------------------------------------------------------------------
# hyperfine


def hyperfine(group, baseline, out, passes):
    """Combines passes of one hyperfine group (same commands, any order).

    Medians are given per pass and over all runs; ratios to the baseline are
    taken within each pass first, so a slow phase of the machine during one
    pass does not leak into the ratio, and the reported ratio is the mean of
    the per-pass ratios.
    """
    per_cmd = {}
    order = []
    for i, path in enumerate(passes):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        for r in data["results"]:
            name = r["command"]
            if name not in per_cmd:
                per_cmd[name] = {"passes": [], "times": []}
                order.append(name)
            per_cmd[name]["passes"].append(median(r["times"]) * 1000)
            per_cmd[name]["times"].extend(t * 1000 for t in r["times"])
    if baseline not in per_cmd:
        sys.exit(f"baseline {baseline!r} not among {order}")
    base = per_cmd[baseline]
    rows = []
    summary = {"group": group, "baseline": baseline, "commands": []}
    for name in order:
        c = per_cmd[name]
        ratios = [m / b for m, b in zip(c["passes"], base["passes"])]
        entry = {
            "name": name,
            "median_ms": median(c["times"]),
            "p90_ms": pct(c["times"], 90),
            "pass_median_ms": c["passes"],
            "ratio": statistics.fmean(ratios) if ratios else float("nan"),
            "pass_ratio": ratios,
            "runs": len(c["times"]),
        }
        summary["commands"].append(entry)
        rows.append(
            [
                name,
                fmt_ms(entry["median_ms"]),
                " / ".join(fmt_ms(m) for m in c["passes"]),
                fmt_ms(entry["p90_ms"]),
                f"{entry['ratio']:.2f}x",
                " / ".join(f"{r:.2f}" for r in ratios),
            ]
        )
    write_json(out, summary)
    print(f"\n### {group} (baseline: {baseline})\n")
    print(
        table(
            ["command", "median ms", "median per pass", "p90 ms", "ratio to baseline", "per pass"],
            rows,
        )
    )
    return summary


# ---------------------------------------------------------------------------
# bench_client results


def client_table(out, files):
    results = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            results.append(json.load(f))
    write_json(out, results)
    rows = []
    for r in results:
        if r.get("mode") == "seq":
            d = r["daemon"]
            rows.append(
                [
                    "daemon, 1 connection, sequential",
                    fmt_ms(d["median_ms"]),
                    fmt_ms(d["p99_ms"]),
                    "",
                    "",
                    r["failures"],
                ]
            )
            if "bare" in r:
                b = r["bare"]
                rows.append(["bare spawn (interleaved)", fmt_ms(b["median_ms"]), fmt_ms(b["p99_ms"]), "", "", 0])
                rows.append(
                    [
                        "daemon cost over bare spawn",
                        f"{r['overhead_median_ms']:.3f} (paired {r['overhead_paired_median_ms']:.3f})",
                        "",
                        "",
                        "",
                        "",
                    ]
                )
        else:
            lat = r["latency"]
            what = "daemon" if r["mode"] == "load" else "bare spawn, same client"
            base = next(
                (b for b in results if b.get("mode") == "spawn" and b.get("clients") == r["clients"]),
                None,
            )
            vs = ""
            if r["mode"] == "load" and base:
                vs = f"{r['runs_per_s'] / base['runs_per_s']:.2f}x runs/s"
            rows.append(
                [
                    f"{what}, {r['clients']} clients",
                    fmt_ms(lat["median_ms"]),
                    fmt_ms(lat["p99_ms"]),
                    f"{r['runs_per_s']:.0f}",
                    vs,
                    r["failures"],
                ]
            )
    print(table(["what", "median ms", "p99 ms", "runs/s", "vs bare", "failures"], rows))


# ---------------------------------------------------------------------------
# policy copies


def policy_copy(src, dst, overrides):
    """Copies a policy with `table.key = value` lines replaced or added.

    A text edit rather than a TOML round trip, so the copy keeps the
    original's comments, examples and layout (its hash changes, as it must).
    """
    with open(src, encoding="utf-8") as f:
        text = f.read()
    for ov in overrides:
        key_path, value = ov.split("=", 1)
        tbl, key = key_path.rsplit(".", 1)
        header = re.compile(r"^\[" + re.escape(tbl) + r"\][ \t]*(#[^\n]*)?$", re.M)
        m = header.search(text)
        line = f"{key} = {value}"
        if not m:
            text = text.rstrip("\n") + f"\n\n[{tbl}]\n{line}\n"
            continue
        start = m.end()
        nxt = re.compile(r"^\[", re.M).search(text, start)
        end = nxt.start() if nxt else len(text)
        body = text[start:end]
        key_re = re.compile(r"^[ \t]*" + re.escape(key) + r"[ \t]*=[^\n]*$", re.M)
        if key_re.search(body):
            body = key_re.sub(line, body, count=1)
        else:
            body = "\n" + line + body
        text = text[:start] + body + text[end:]
    with open(dst, "w", encoding="utf-8") as f:
        f.write(text)


# ---------------------------------------------------------------------------
# running agent-exec


def run_cli(argv, time_v=None):
    """Runs one command; returns (wall_ms, returncode, stdout, max_rss_kib)."""
    full = list(argv)
    tf = None
    if time_v:
        tf = tempfile.NamedTemporaryFile(prefix="time-v-", delete=False)
        tf.close()
        full = [time_v, "-v", "-o", tf.name] + full
    t0 = time.perf_counter_ns()
    p = subprocess.run(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = (time.perf_counter_ns() - t0) / 1e6
    rss = None
    if tf:
        try:
            with open(tf.name, encoding="utf-8") as f:
                for line in f:
                    if "Maximum resident set size" in line:
                        rss = int(line.rsplit(":", 1)[1])
        finally:
            os.unlink(tf.name)
    return wall, p.returncode, p.stdout, rss


def parse_result(stdout):
    try:
        return json.loads(stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def describe(res, rc):
    if res is None:
        return f"no JSON result (exit {rc})"
    return f"ok={res.get('ok')} error_type={res.get('error_type')} message={res.get('message')!r}"


# ---------------------------------------------------------------------------
# 1 GB output


def output(a):
    n = a.bytes
    # GNU time, not the shell keyword: it reports the peak RSS.
    time_v = "/usr/bin/time" if os.path.exists("/usr/bin/time") else None
    ae = [a.ae, "--policy", a.policy, "--root", a.root, "--shell", f"head -c {n} /dev/zero"]
    bare = ["sh", "-c", f"head -c {n} /dev/zero | cat > /dev/null"]
    res_ok = None
    rows = {"bare": [], "agent": []}
    for i in range(a.runs):
        # Interleaved, so both see the same phases of a noisy machine.
        w, rc, _, rss = run_cli(bare, time_v)
        rows["bare"].append({"wall_ms": w, "max_rss_kib": rss, "rc": rc})
        w, rc, so, rss = run_cli(ae, time_v)
        res = parse_result(so)
        ok = bool(res and res.get("ok") and res.get("stdout_bytes") == n)
        if not ok:
            print(f"agent-exec 1 GB run failed: {describe(res, rc)}", file=sys.stderr)
        res_ok = ok if res_ok is None else (res_ok and ok)
        rows["agent"].append(
            {
                "wall_ms": w,
                "max_rss_kib": rss,
                "rc": rc,
                "ok": ok,
                "stdout_bytes": res and res.get("stdout_bytes"),
            }
        )

    # Hard cap: the same endless writer against a capped policy, next to a
    # writer that stops by itself just under the cap. Both produce about
    # `cap` bytes; the difference in wall time is the cost of noticing the
    # crossing, killing the child and returning.
    cap_rows = {"under": [], "over": []}
    if a.capped_policy:
        under = max(1, a.cap - 64 * 1024)
        ae_under = [a.ae, "--policy", a.capped_policy, "--root", a.root, "--shell", f"head -c {under} /dev/zero"]
        ae_over = [a.ae, "--policy", a.capped_policy, "--root", a.root, "--shell", f"head -c {n} /dev/zero"]
        for i in range(a.cap_runs):
            w, rc, so, _ = run_cli(ae_under)
            res = parse_result(so)
            cap_rows["under"].append({"wall_ms": w, "ok": bool(res and res.get("ok")), "rc": rc})
            if not (res and res.get("ok")):
                print(f"under-cap run failed: {describe(res, rc)}", file=sys.stderr)
            w, rc, so, _ = run_cli(ae_over)
            res = parse_result(so)
            cap_rows["over"].append(
                {
                    "wall_ms": w,
                    "rc": rc,
                    "error_type": res and res.get("error_type"),
                    "stdout_bytes": res and res.get("stdout_bytes"),
                    "stderr_bytes": res and res.get("stderr_bytes"),
                }
            )
            if not (res and res.get("error_type") == "OUTPUT_LIMIT"):
                print(f"over-cap run not stopped for OUTPUT_LIMIT: {describe(res, rc)}", file=sys.stderr)

    bw = [r["wall_ms"] for r in rows["bare"]]
    aw = [r["wall_ms"] for r in rows["agent"]]
    arss = [r["max_rss_kib"] for r in rows["agent"] if r["max_rss_kib"] is not None]
    brss = [r["max_rss_kib"] for r in rows["bare"] if r["max_rss_kib"] is not None]
    summary = {
        "bytes": n,
        "runs": a.runs,
        "bare_wall_ms": median(bw),
        "agent_wall_ms": median(aw),
        "wall_ratio": median(aw) / median(bw) if bw else float("nan"),
        "bare_mb_per_s": n / 1e6 / (median(bw) / 1000) if bw else float("nan"),
        "agent_mb_per_s": n / 1e6 / (median(aw) / 1000) if aw else float("nan"),
        "agent_peak_rss_mib": max(arss) / 1024 if arss else None,
        "bare_peak_rss_mib": max(brss) / 1024 if brss else None,
        "all_ok": bool(res_ok),
        "raw": rows,
    }
    if a.capped_policy:
        uw = [r["wall_ms"] for r in cap_rows["under"]]
        ow = [r["wall_ms"] for r in cap_rows["over"]]
        over_bytes = [
            (r["stdout_bytes"] or 0) + (r["stderr_bytes"] or 0) - a.cap for r in cap_rows["over"] if r["stdout_bytes"]
        ]
        stopped = all(r["error_type"] == "OUTPUT_LIMIT" for r in cap_rows["over"])
        summary["cap"] = {
            "cap_bytes": a.cap,
            "runs": a.cap_runs,
            "under_wall_ms": median(uw),
            "over_wall_ms": median(ow),
            "stop_ms": median(ow) - median(uw),
            "overshoot_bytes_median": median(over_bytes) if over_bytes else None,
            "all_stopped_for_output_limit": stopped,
            "raw": cap_rows,
        }
    write_json(a.out, summary)

    print(f"\n### {n / 1e9:g} GB to stdout ({a.runs} runs each, interleaved)\n")
    rows_t = [
        [
            "bare `head \\| cat > /dev/null`",
            fmt_ms(summary["bare_wall_ms"]),
            f"{summary['bare_mb_per_s']:.0f}",
            f"{summary['bare_peak_rss_mib']:.1f}" if summary["bare_peak_rss_mib"] else "n/a",
            "1.00x",
        ],
        [
            "agent-exec --shell 'head ...'",
            fmt_ms(summary["agent_wall_ms"]),
            f"{summary['agent_mb_per_s']:.0f}",
            f"{summary['agent_peak_rss_mib']:.1f}" if summary["agent_peak_rss_mib"] else "n/a",
            f"{summary['wall_ratio']:.2f}x",
        ],
    ]
    print(table(["what", "wall ms (median)", "MB/s", "peak RSS MiB (max)", "wall ratio"], rows_t))
    if not summary["all_ok"]:
        print("\nWARNING: some agent-exec runs did not return ok with every byte counted.")
    if a.capped_policy:
        c = summary["cap"]
        print(f"\n### hard output cap ({a.cap} bytes, {a.cap_runs} runs each, interleaved)\n")
        print(
            table(
                ["what", "wall ms (median)"],
                [
                    ["writer stopping by itself under the cap", fmt_ms(c["under_wall_ms"])],
                    ["endless writer, killed at the cap", fmt_ms(c["over_wall_ms"])],
                    ["stop cost (difference)", fmt_ms(c["stop_ms"])],
                    ["bytes past the cap before the stop (median)", c["overshoot_bytes_median"]],
                    ["every capped run ended OUTPUT_LIMIT", c["all_stopped_for_output_limit"]],
                ],
            )
        )
    return 0 if summary["all_ok"] else 1


# ---------------------------------------------------------------------------
# timeout precision


def tagged(tag):
    """Pids with `tag` as one of their arguments, wherever they are."""
    found = []
    want = tag.encode()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if want in argv:
            found.append(int(d))
    return found


# Two spellings of "a child sleeping, plus a grandchild that left for its
# own session". The first is the classic one; policies that refuse `setsid`
# as a wrapper they cannot inspect get the second, which builds the same
# process tree from an allowed interpreter. TAG is a unique argument that
# marks this run's processes.
TIMEOUT_SHELLS = [
    ("setsid", "setsid sleep {tag} & sleep {tag}"),
    (
        "python-setsid",
        "{py} -c 'import os,sys,time; os.fork() or (os.setsid(), time.sleep(60)); time.sleep(60)' {tag}",
    ),
]


def timeout_bench(a):
    rows = []
    base = []
    survivors_total = 0
    bad = 0
    variant = 0
    i = 0
    while i < a.runs:
        # A unique duration per run tags its processes, so other work on the
        # machine running `sleep 60` can never be mistaken for a survivor.
        tag = f"60.{os.getpid() % 10000:04d}{i:04d}"
        name, template = TIMEOUT_SHELLS[variant]
        shell = template.format(tag=tag, py=a.python)
        w, rc, so, _ = run_cli(
            [a.ae, "--policy", a.policy, "--root", a.root, "--timeout-ms", str(a.timeout_ms), "--shell", shell]
        )
        res = parse_result(so)
        et = res and res.get("error_type")
        if i == 0 and et == "PERMISSION_DENIED" and variant + 1 < len(TIMEOUT_SHELLS):
            print(f"the policy refuses `{shell}` ({res.get('message')}); using the next spelling", file=sys.stderr)
            variant += 1
            continue
        left = tagged(tag)
        survivors_total += len(left)
        if et != "COMMAND_TIMEOUT":
            bad += 1
            print(f"run {i}: expected COMMAND_TIMEOUT, got {describe(res, rc)}", file=sys.stderr)
        rows.append(
            {
                "command": shell,
                "wall_ms": w,
                "late_ms": w - a.timeout_ms,
                "duration_ms": res and res.get("duration_ms"),
                "error_type": et,
                "survivors": left,
            }
        )
        for pid in left:
            # Ours to clean up: tagged with this run's unique argument.
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        # Startup baseline from the same loop: the same binary and policy
        # running true, so "late" can be split into startup and kill.
        w0, _, _, _ = run_cli([a.ae, "--policy", a.policy, "--root", a.root, "--", a.true])
        base.append(w0)
        i += 1
    late = [r["late_ms"] for r in rows]
    summary = {
        "command": rows[0]["command"] if rows else None,
        "timeout_ms": a.timeout_ms,
        "runs": a.runs,
        "late_median_ms": median(late),
        "late_max_ms": max(late) if late else float("nan"),
        "startup_median_ms": median(base),
        "late_minus_startup_ms": median(late) - median(base),
        "survivors": survivors_total,
        "wrong_result": bad,
        "raw": rows,
    }
    write_json(a.out, summary)
    print(f"\n### timeout precision ({a.runs} runs, deadline {a.timeout_ms} ms)\n")
    print(f"command: `{summary['command']}`\n")
    print(
        table(
            ["what", "ms"],
            [
                ["result after the deadline (median wall - deadline)", fmt_ms(summary["late_median_ms"])],
                ["worst run", fmt_ms(summary["late_max_ms"])],
                ["CLI startup, `-- true` (interleaved baseline)", fmt_ms(summary["startup_median_ms"])],
                ["late minus startup", fmt_ms(summary["late_minus_startup_ms"])],
                ["surviving tagged processes (all runs)", survivors_total],
                ["runs not reported COMMAND_TIMEOUT", bad],
            ],
        )
    )
    return 0 if survivors_total == 0 and bad == 0 else 1


# ---------------------------------------------------------------------------
# targets


def lone(a):
    """Calls that come alone: each command runs after `idle` seconds of
    quiet, the commands alternating, so every call meets a cold machine
    (an RCU grace period not yet started, caches of a quiet minute), as
    an agent's single call does. The first command is the baseline."""
    pairs = [c.split("=", 1) for c in a.commands]
    times = {name: [] for name, _ in pairs}
    for i in range(a.runs):
        order = pairs if i % 2 == 0 else pairs[::-1]
        for name, cmd in order:
            time.sleep(a.idle)
            t0 = time.perf_counter()
            subprocess.run(shlex.split(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            times[name].append((time.perf_counter() - t0) * 1000)
    base = median(times[pairs[0][0]])
    summary = {"idle_s": a.idle, "runs": a.runs, "baseline": pairs[0][0], "commands": []}
    rows = []
    for name, cmd in pairs:
        m = median(times[name])
        summary["commands"].append({"name": name, "command": cmd, "median_ms": m, "over_baseline_ms": m - base, "times_ms": times[name]})
        rows.append([name, fmt_ms(m), fmt_ms(max(times[name])), f"{m - base:+.2f}"])
    write_json(a.out, summary)
    print(f"\n### calls that come alone ({a.runs} each, {a.idle} s of quiet before each)\n")
    print(table(["command", "median ms", "worst ms", "over bare ms"], rows))


def rounds(a):
    """Each round runs every command once, in a new random order, so a slow
    stretch of the machine falls on all of them alike. Reports each one's
    median, its ratio to the first (the baseline), and the median of its
    per-round difference to the command before it: the cost of one rung
    of a ladder, paired within rounds, which is steadier than the
    difference of two medians."""
    pairs = [c.split("=", 1) for c in a.commands]
    times = {name: [] for name, _ in pairs}
    order = list(pairs)
    for _ in range(a.warmup):
        for _, cmd in order:
            subprocess.run(shlex.split(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    for _ in range(a.runs):
        random.shuffle(order)
        for name, cmd in order:
            t0 = time.perf_counter()
            subprocess.run(shlex.split(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            times[name].append((time.perf_counter() - t0) * 1000)
    base = median(times[pairs[0][0]])
    summary = {"runs": a.runs, "baseline": pairs[0][0], "commands": []}
    rows = []
    prev = None
    for name, cmd in pairs:
        m = median(times[name])
        step = None if prev is None else median([x - y for x, y in zip(times[name], times[prev])])
        summary["commands"].append(
            {"name": name, "command": cmd, "median_ms": m, "ratio": m / base, "step_ms": step, "times_ms": times[name]}
        )
        rows.append([name, fmt_ms(m), f"{m / base:.2f}x", "" if step is None else f"{step:+.2f}"])
        prev = name
    write_json(a.out, summary)
    print(f"\n### {a.runs} shuffled rounds (baseline: {pairs[0][0]})\n")
    print(table(["command", "median ms", "ratio to baseline", "over the row above, paired ms"], rows))


def load_opt(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def criterion_median_us(crit_dir, group, name):
    est = load_opt(os.path.join(crit_dir, group, name, "new", "estimates.json"))
    if not est:
        return None
    return est["median"]["point_estimate"] / 1000.0


def report(bench_dir, crit_dir):
    """The issue's targets against the latest numbers; missing data is said."""
    rows = []

    def add(what, value, target, met, unit=""):
        if value is None:
            rows.append([what, "not measured", target, "n/a"])
        else:
            shown = f"{value:.3g}{unit}" if isinstance(value, float) else f"{value}{unit}"
            rows.append([what, shown, target, "met" if met else "**missed**"])

    spawn = load_opt(os.path.join(bench_dir, "spawn-true.json"))
    by = {c["name"]: c for c in spawn["commands"]} if spawn else {}
    bw = by.get("bwrap --unshare-all")
    # The default build, then the statically linked one (docs/deploy.md).
    for name, label in [("agent-exec CLI", "CLI"), ("agent-exec CLI (static-pie build)", "static-pie CLI")]:
        cli = by.get(name)
        add(f"{label} `true` / bare `true` (median ratio)", cli and cli["ratio"], "<= 3x", bool(cli and cli["ratio"] <= 3), "x")
        if cli and bw:
            speed = statistics.fmean(b / c for b, c in zip(bw["pass_median_ms"], cli["pass_median_ms"]))
        else:
            speed = None
        add(f"bwrap --unshare-all / {label} (how much faster)", speed, ">= 2.5x", bool(speed and speed >= 2.5), "x")

    for name, label in [
        ("agent-exec CLI --daemon (thin client)", "thin-client CLI"),
        ("agent-exec-client --daemon (small thin client)", "agent-exec-client"),
        ("agent-exec-client --daemon (static-pie build)", "static-pie agent-exec-client"),
    ]:
        thin = by.get(name)
        add(f"{label} `true` / bare `true` (median ratio)", thin and thin["ratio"], "<= 2x", bool(thin and thin["ratio"] <= 2), "x")
    alone = load_opt(os.path.join(bench_dir, "spawn-lone.json"))
    lone_by = {c["name"]: c for c in alone["commands"]} if alone else {}
    lone_cli = lone_by.get("agent-exec CLI")
    over = lone_cli and lone_cli["over_baseline_ms"]
    add("a lone CLI call (after 1 s idle) over bare", over, "<= 5 ms", bool(over is not None and over <= 5), " ms")
    lone_st = lone_by.get("agent-exec CLI (static-pie build)")
    over_st = lone_st and lone_st["over_baseline_ms"]
    add("a lone static-pie CLI call over bare", over_st, "<= 5 ms", bool(over_st is not None and over_st <= 5), " ms")

    seq = load_opt(os.path.join(bench_dir, "spawn-daemon-seq.json"))
    ov = seq and seq.get("overhead_median_ms")
    add("daemon per-run cost over a bare spawn (median)", ov, "<= 0.3 ms", bool(ov is not None and ov <= 0.3), " ms")

    daemon = load_opt(os.path.join(bench_dir, "daemon.json")) or []
    d32 = next((r for r in daemon if r.get("mode") == "load" and r.get("clients") == 32), None)
    add("daemon runs/s at 32 clients", d32 and round(d32["runs_per_s"]), ">= 1500/s", bool(d32 and d32["runs_per_s"] >= 1500))
    add("daemon p99 at 32 clients", d32 and d32["latency"]["p99_ms"], "<= 15 ms", bool(d32 and d32["latency"]["p99_ms"] <= 15), " ms")

    for name, label, limit in [
        ("git_status_3tok", "decision, `git status --short`", 5),
        ("cargo_test_5tok", "decision, 5-token command", 5),
        ("pipeline_40tok", "decision, 40-token pipeline", 30),
    ]:
        v = criterion_median_us(crit_dir, "decide", name)
        add(label, v, f"<= {limit} us", bool(v is not None and v <= limit), " us")

    out = load_opt(os.path.join(bench_dir, "output.json"))
    rss = out and out.get("agent_peak_rss_mib")
    add("1 GB: supervisor peak RSS", rss, "<= 16 MiB", bool(rss is not None and rss <= 16), " MiB")
    wr = out and out.get("wall_ratio")
    add("1 GB: wall vs bare `head \\| cat`", wr, "<= 1.1x", bool(wr is not None and wr <= 1.1), "x")
    cap = out and out.get("cap")
    st = cap and cap.get("stop_ms")
    add("hard cap: stop after crossing", st, "<= 10 ms", bool(st is not None and st <= 10), " ms")

    to = load_opt(os.path.join(bench_dir, "timeout.json"))
    late = to and to.get("late_median_ms")
    add("timeout: result after the deadline (median)", late, "<= 50 ms", bool(late is not None and late <= 50), " ms")
    surv = to and to.get("survivors")
    add("timeout: surviving processes", surv, "0", surv == 0)
    print(table(["target", "measured", "wanted", "verdict"], rows))


def phases(out, labelled):
    """Medians of the phases `one_shot --times` prints, one line per run
    ("init 470 prepare 90 ..."), for each NAME=FILE."""
    summary = {}
    rows = []
    names = []
    for item in labelled:
        label, _, path = item.partition("=")
        per = {}
        with open(path, encoding="utf-8") as f:
            for line in f:
                words = line.split()
                for what, us in zip(words[::2], words[1::2]):
                    if us.isdigit():
                        per.setdefault(what, []).append(int(us))
        if not per:
            sys.exit(f"no phase times in {path}")
        summary[label] = {what: median(v) for what, v in per.items()}
        for what in per:
            if what not in names:
                names.append(what)
    for label, med in summary.items():
        total = sum(med.values())
        rows.append([label] + [f"{med.get(n, 0):.0f}" for n in names] + [f"{total:.0f}"])
    write_json(out, summary)
    print("\n### the sandbox crate's phases (median us per run)\n")
    print(table(["layers"] + names + ["sum of medians"], rows))
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("machine")
    h = sub.add_parser("hyperfine")
    h.add_argument("group")
    h.add_argument("baseline")
    h.add_argument("out")
    h.add_argument("passes", nargs="+")
    c = sub.add_parser("client-table")
    c.add_argument("out")
    c.add_argument("files", nargs="+")
    p = sub.add_parser("policy-copy")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("overrides", nargs="+")
    o = sub.add_parser("output")
    o.add_argument("--ae", required=True)
    o.add_argument("--policy", required=True)
    o.add_argument("--capped-policy")
    o.add_argument("--cap", type=int, default=1 << 20)
    o.add_argument("--root", required=True)
    o.add_argument("--bytes", type=int, default=1_000_000_000)
    o.add_argument("--runs", type=int, default=5)
    o.add_argument("--cap-runs", type=int, default=20)
    o.add_argument("--out", required=True)
    t = sub.add_parser("timeout")
    t.add_argument("--ae", required=True)
    t.add_argument("--policy", required=True)
    t.add_argument("--root", required=True)
    t.add_argument("--timeout-ms", type=int, default=500)
    t.add_argument("--runs", type=int, default=10)
    t.add_argument("--python", default="python3")
    t.add_argument("--true", default="true")
    t.add_argument("--out", required=True)
    lo = sub.add_parser("lone")
    lo.add_argument("--runs", type=int, default=10)
    lo.add_argument("--idle", type=float, default=1.0)
    lo.add_argument("--out", required=True)
    lo.add_argument("commands", nargs="+", help="NAME=COMMAND, the first is the baseline")
    ro = sub.add_parser("rounds")
    ro.add_argument("--runs", type=int, default=300)
    ro.add_argument("--warmup", type=int, default=10)
    ro.add_argument("--out", required=True)
    ro.add_argument("commands", nargs="+", help="NAME=COMMAND, the first is the baseline")
    ph = sub.add_parser("phases")
    ph.add_argument("--out", required=True)
    ph.add_argument("files", nargs="+", help="NAME=FILE of `one_shot --times` lines")
    r = sub.add_parser("report")
    r.add_argument("bench_dir")
    r.add_argument("--criterion", default="target/criterion")
    a = ap.parse_args()
    if a.cmd == "machine":
        print(json.dumps(machine(), indent=2))
    elif a.cmd == "hyperfine":
        hyperfine(a.group, a.baseline, a.out, a.passes)
    elif a.cmd == "client-table":
        client_table(a.out, a.files)
    elif a.cmd == "policy-copy":
        policy_copy(a.src, a.dst, a.overrides)
    elif a.cmd == "output":
        return output(a)
    elif a.cmd == "timeout":
        return timeout_bench(a)
    elif a.cmd == "lone":
        lone(a)
    elif a.cmd == "rounds":
        rounds(a)
    elif a.cmd == "phases":
        phases(a.out, a.files)
    elif a.cmd == "report":
        report(a.bench_dir, a.criterion)
    return 0


if __name__ == "__main__":
    sys.exit(main())
