"""Run the agent-command corpus bare and through agent-exec, and classify each.

  python3 scripts/parity.py prepare [KINDS]
  python3 scripts/parity.py run [--owners user,root] [--kinds python,rust,node]
                                [--ids ID,...] [--subset ci] [--out DIR]
  python3 scripts/parity.py report RESULTS.json [--doc docs/utility.md] [--notes FILE]
  python3 scripts/parity.py check RESULTS.json [--floor evals/parity-floor.json]

Every command runs in a fresh copy of the prepared project (reset from the
pristine snapshot), once bare as the project's owner with the owner's
toolchains on PATH, once as `agent-exec --policy policies/code.toml --root
PROJECT --shell CMD` started by root. Negative controls run only sandboxed and
are judged by their effect (see CHECKS).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import parity_prepare as prep  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "evals" / "agent-commands.jsonl"
CANARY = prep.CANARY
BARE_TIMEOUT = 300
REFUSALS = {"PERMISSION_DENIED", "APPROVAL_REQUIRED"}
NET_ERRORS = re.compile(
    r"Temporary failure in name resolution|getaddrinfo|EAI_AGAIN|ENOTFOUND|Network is unreachable|"
    r"Could not resolve host|Name or service not known|network request .* failed|ECONNREFUSED|"
    r"NewConnectionError|request to https?://\S+ failed")
# Differences the sandbox makes on purpose; anything else that differs is a
# breakage. Kept short and explicit.
BY_DESIGN = {
    "output_limit": "the policy keeps the head and tail of long output (output_chars); the kept part matches bare",
    "network_off": "code.toml runs without the network; the command needed the registry",
    "fresh_home": "the run's HOME is a fresh directory; only the printed HOME path differs",
}


def load_corpus(path=CORPUS):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def subst(text: str, ctx: dict) -> str:
    for k, v in ctx.items():
        text = text.replace("{" + k + "}", v)
    return text


def reset(cache: Path, owner: str, kind: str) -> Path:
    work = cache / "work" / owner / kind
    pristine = cache / "pristine" / owner / kind
    # rsync compares size and mtime, so a reset costs a walk of the tree, not
    # a copy of node_modules; --checksum would be exact but far slower.
    if shutil.which("rsync"):
        subprocess.run(["rsync", "-a", "--delete", f"{pristine}/", f"{work}/"], check=True)
    else:
        if work.exists():
            shutil.rmtree(work)
        subprocess.run(["cp", "-a", str(pristine), str(work)], check=True)
    return work


def write_setup(rec: dict, work: Path, owner: str) -> None:
    for rel, content in (rec.get("setup_files") or {}).items():
        p = work / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
        if owner == "user":
            for q in [p, *p.relative_to(work).parents]:
                os.chown(work / q, prep.UID, prep.UID)


def bare(cmd: str, owner: str, kind: str, work: Path, cache: Path, home: Path) -> dict:
    env = prep.owner_env(owner, kind, work, home, cache)
    argv = ["bash", "-c", cmd]
    if owner == "user":
        argv = ["setpriv", f"--reuid={prep.UID}", f"--regid={prep.UID}", "--init-groups", *argv]
    t = time.monotonic()
    try:
        r = subprocess.run(argv, cwd=work, env=env, capture_output=True, timeout=BARE_TIMEOUT, stdin=subprocess.DEVNULL)
        return {"exit": r.returncode, "stdout": r.stdout.decode(errors="replace"),
                "stderr": r.stderr.decode(errors="replace"), "ms": int((time.monotonic() - t) * 1000)}
    except subprocess.TimeoutExpired:
        return {"exit": None, "stdout": "", "stderr": "bare run timed out", "ms": BARE_TIMEOUT * 1000}


def sandboxed(cmd: str, work: Path, binary: Path, policy: Path) -> dict:
    env = {"PATH": prep.SYSTEM_PATH, "HOME": "/root", "LANG": "C.UTF-8",
           # Canaries: a secret in the supervisor's environment must not reach
           # the command (negative controls grep for it).
           "OPENAI_API_KEY": f"{CANARY}-env", "GITHUB_TOKEN": f"{CANARY}-env"}
    argv = [str(binary), "--policy", str(policy), "--root", str(work), "--shell", cmd]
    t = time.monotonic()
    try:
        r = subprocess.run(argv, cwd=work, env=env, capture_output=True, timeout=BARE_TIMEOUT * 3,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"exit": None, "error_type": "HARNESS_TIMEOUT", "stdout": "", "stderr": "", "message": "", "ms": 0}
    try:
        tr = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"exit": None, "error_type": "NO_TOOLRESULT", "stdout": r.stdout.decode(errors="replace")[:2000],
                "stderr": r.stderr.decode(errors="replace")[:2000], "message": "", "ms": 0}
    return {"exit": tr.get("exit_code"), "error_type": tr.get("error_type"), "stdout": tr.get("stdout", ""),
            "stderr": tr.get("stderr", ""), "message": tr.get("message", ""), "rule": tr.get("matched_rule"),
            "decision": tr.get("policy_decision"), "suggestion": tr.get("suggestion"),
            "decided_by": tr.get("decided_by"),
            "truncated": bool(tr.get("stdout_truncated") or tr.get("stderr_truncated")),
            "ms": int((time.monotonic() - t) * 1000)}


_NORMS = [
    (re.compile(r"\b\d+(\.\d+)?\s?(ms|s|sec|seconds)\b"), "<t>"),
    (re.compile(r"\b\d+m\d+(\.\d+)?s\b"), "<t>"),
    (re.compile(r"0x[0-9a-f]{6,}"), "0x<addr>"),
    (re.compile(r"/tmp/[A-Za-z0-9_.\-]+"), "/tmp/<tmp>"),
    (re.compile(r"\b[0-9a-f]{7,40}\b"), "<sha>"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z?"), "<date>"),
    (re.compile(r"(Date:\s+).*"), r"\1<date>"),
    (re.compile(r"\d+ (seconds?|minutes?|hours?|days?) ago"), "<ago>"),
    # Centred banners (pytest's `==== 145 passed in 9.36s ====`) pad to a
    # fixed width, so a timing one digit longer shifts the padding.
    (re.compile(r"([=_-])\1{2,}"), r"\1\1\1"),
]


def norm(text: str, work: Path, home: str | None) -> str:
    text = text.replace(str(work), "{root}")
    if home:
        text = text.replace(home, "<HOME>")
    for rx, rep in _NORMS:
        text = rx.sub(rep, text)
    return text.strip()


def classify(b: dict, s: dict, work: Path, bare_home: str, setup_ok: bool) -> tuple[str, str]:
    if s.get("error_type") in REFUSALS:
        return "refused", f"{s.get('rule')}: {s.get('message')}"
    if not setup_ok:
        return "knock_on", "a setup step failed sandboxed but not bare"
    bo = norm(b["stdout"] + "\n" + b["stderr"], work, bare_home)
    so_raw = s["stdout"] + "\n" + s["stderr"]
    # The owner's home in sandboxed output is the same directory (the
    # toolchains the policy grants live there), so it is named alike.
    so = norm(so_raw, work, bare_home)
    if b["exit"] == s["exit"] and bo == so:
        return "same", ""
    # Parallel runners (cargo's doctests, pytest-xdist) print the same lines
    # in an order that changes from run to run, bare or not.
    if b["exit"] == s["exit"] and sorted(bo.splitlines()) == sorted(so.splitlines()):
        return "same", ""
    if b["exit"] == s["exit"]:
        so_home = re.sub(r"/tmp/<tmp>|/[^\s:]*agent-exec[^\s:]*home[^\s:]*", "<HOME>", so)
        if so_home == re.sub(r"/tmp/<tmp>", "<HOME>", bo):
            return "by_design", "fresh_home"
        if s.get("truncated"):
            head = so.split("[", 1)[0].strip()[:2000]
            if head and bo.startswith(head[: max(1, len(head) - 200)]):
                return "by_design", "output_limit"
    if b["exit"] == 0 and NET_ERRORS.search(so_raw) and not NET_ERRORS.search(b["stdout"] + b["stderr"]):
        return "by_design", "network_off"
    return "broken", f"exit bare={b['exit']} sandboxed={s['exit']} ({s.get('error_type')})"


def state_of(path: str):
    p = Path(path)
    if not p.exists():
        return None
    st = p.stat()
    h = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return (h, st.st_mode)


def judge_negative(rec: dict, s: dict, ctx: dict, before: dict) -> tuple[str, str]:
    chk = rec["check"]
    failures = []
    text = s["stdout"] + s["stderr"] + s.get("message", "")
    if "output_lacks" in chk and subst(chk["output_lacks"], ctx) in text:
        failures.append("the output contains the canary")
    for key in ("path_absent",):
        if key in chk and Path(subst(chk[key], ctx)).exists():
            failures.append(f"{subst(chk[key], ctx)} was created")
    if "path_present" in chk and not Path(subst(chk["path_present"], ctx)).exists():
        failures.append(f"{subst(chk['path_present'], ctx)} is gone")
    for key in ("path_unchanged", "mode_unchanged"):
        if key in chk:
            p = subst(chk[key], ctx)
            if state_of(p) != before.get(p):
                failures.append(f"{p} changed")
    if chk.get("not_ok") and s.get("error_type") is None and s.get("exit") == 0:
        failures.append("it ran and succeeded")
    if failures:
        return "ESCAPED", "; ".join(failures)
    if s.get("error_type") in REFUSALS:
        return "refused", f"{s.get('rule')}: {s.get('message')}"
    return "contained", f"ran ({s.get('error_type') or 'exit ' + str(s.get('exit'))}); effect checks passed"


def restore_canaries(cache: Path, home: Path) -> None:
    prep.ensure_user(cache)
    for p in ["pwned.txt", "touched", "py.txt"]:
        (cache / "outside" / p).unlink(missing_ok=True)
    for p in [home / "stolen.txt", home / ".ssh" / "authorized_keys", Path("/tmp/keys.tgz")]:
        p.unlink(missing_ok=True)


def run_one(rec, owner, cache, home, binary, policy):
    kind = rec["project"] if rec["project"] != "any" else "python"
    work = reset(cache, owner, kind)
    ctx = {"root": str(work), "home": str(home), "outside": str(cache / "outside")}
    cmd = subst(rec["command"], ctx)
    res = {"id": rec["id"], "owner": owner, "project": kind, "command": rec["command"]}
    if rec.get("negative"):
        chk = rec["check"]
        before = {subst(chk[k], ctx): state_of(subst(chk[k], ctx)) for k in ("path_unchanged", "mode_unchanged") if k in chk}
        s = sandboxed(cmd, work, binary, policy)
        res["category"], res["reason"] = judge_negative(rec, s, ctx, before)
        res["sandbox"] = excerpt(s)
        restore_canaries(cache, home)
        return res
    write_setup(rec, work, owner)
    setup_bare_ok = all(bare(subst(c, ctx), owner, kind, work, cache, home)["exit"] == 0 for c in rec.get("setup_commands", []))
    b = bare(cmd, owner, kind, work, cache, home)
    work = reset(cache, owner, kind)
    write_setup(rec, work, owner)
    setup_ok = True
    for c in rec.get("setup_commands", []):
        ss = sandboxed(subst(c, ctx), work, binary, policy)
        if ss.get("exit") != 0 and setup_bare_ok:
            setup_ok = False
            res["setup_failure"] = excerpt(ss)
    s = sandboxed(cmd, work, binary, policy)
    bare_home = prep.owner_env(owner, kind, work, home, cache)["HOME"]
    res["category"], res["reason"] = classify(b, s, work, bare_home, setup_ok)
    res["rule"] = s.get("rule")
    res["bare"] = excerpt(b)
    res["sandbox"] = excerpt(s)
    return res


def excerpt(r: dict, n=600) -> dict:
    out = {k: r.get(k) for k in ("exit", "error_type", "rule", "decided_by", "ms", "truncated") if k in r}
    out["stdout"] = (r.get("stdout") or "")[-n:]
    out["stderr"] = (r.get("stderr") or "")[-n:]
    if r.get("message"):
        out["message"] = r["message"][:400]
    if r.get("suggestion"):
        out["suggestion"] = r["suggestion"][:300]
    return out


def cmd_run(a) -> int:
    cache = Path(a.cache)
    home = prep.ensure_user(cache)
    corpus = load_corpus()
    if a.subset:
        corpus = [r for r in corpus if a.subset in (r.get("tags") or [])]
    if a.ids:
        want = set(a.ids.split(","))
        corpus = [r for r in corpus if r["id"] in want]
    kinds = set(a.kinds.split(","))
    corpus = [r for r in corpus if r["project"] in kinds or r["project"] == "any"]
    binary = Path(a.binary).resolve()
    policy = (REPO / "policies" / "code.toml").resolve()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    # Each result is appended as it comes, so an interrupted run resumes
    # where it stopped (--resume) instead of starting over.
    partial = out / "results.partial.jsonl"
    results = [json.loads(x) for x in partial.read_text().splitlines()] if a.resume and partial.exists() else []
    done = {(r["id"], r["owner"]) for r in results}
    t0 = time.monotonic()
    with partial.open("a" if a.resume else "w") as log:
        for owner in a.owners.split(","):
            for i, rec in enumerate(corpus):
                if (rec["id"], owner) in done:
                    continue
                res = run_one(rec, owner, cache, home, binary, policy)
                results.append(res)
                log.write(json.dumps(res) + "\n")
                log.flush()
                print(f"[{owner} {i + 1}/{len(corpus)}] {res['category']:<10} {rec['id']} "
                      f"{res.get('reason', '')[:100]}", flush=True)
    meta = {"binary": str(binary), "policy": "policies/code.toml", "commands": len(corpus),
            "owners": a.owners.split(","), "kinds": sorted(kinds), "seconds": int(time.monotonic() - t0),
            "git": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True).stdout.strip(),
            "projects": json.loads((cache / "prepared.json").read_text())}
    (out / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    import parity_report as rep  # noqa: E402
    (out / "results.md").write_text(rep.markdown({"meta": meta, "results": results}))
    (out / "details.md").write_text(rep.notes({"meta": meta, "results": results}))
    print(f"wrote {out / 'results.json'}, {out / 'results.md'} and {out / 'details.md'}")
    return 0


def merge(parts: list[dict]) -> dict:
    meta = dict(parts[0]["meta"])
    meta["owners"] = [o for p in parts for o in p["meta"]["owners"]]
    meta["seconds"] = max(p["meta"]["seconds"] for p in parts)
    results = [r for p in parts for r in p["results"]]
    meta["commands"] = len({r["id"] for r in results})
    return {"meta": meta, "results": results}


def cmd_check(results: Path, floor_file: Path) -> int:
    """Negative controls strictly (every one refused or contained, except the
    escapes the floor file names, each of which must still escape so the list
    shrinks as fixes land); the same-as-bare share only as a recorded floor."""
    data = json.loads(results.read_text())
    floor = json.loads(floor_file.read_text())
    known = set(floor.get("known_escapes", []))
    problems = []
    escaped = {r["id"] for r in data["results"] if r["category"] == "ESCAPED"}
    for r in data["results"]:
        if r["category"] == "ESCAPED" and r["id"] not in known:
            problems.append(f"negative control {r['id']} ({r['owner']}) got through: {r['reason']}")
    ran = {r["id"] for r in data["results"] if r["id"].startswith("neg-")}
    for k in sorted((known & ran) - escaped):
        problems.append(f"{k} no longer escapes: remove it from known_escapes in {floor_file.name}")
    for owner, share in floor.get("min_same_share", {}).items():
        pos = [r for r in data["results"] if r["owner"] == owner and not r["id"].startswith("neg-")]
        if not pos:
            continue
        got = sum(r["category"] in ("same", "by_design") for r in pos) / len(pos)
        print(f"{owner}-owned: {got:.1%} same as bare or different by design (floor {share:.1%})")
        if got + 1e-9 < share:
            problems.append(f"{owner}-owned parity {got:.1%} fell below the floor {share:.1%}")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("kinds", nargs="?", default="python,rust,node")
    r = sub.add_parser("run")
    r.add_argument("--owners", default="user,root")
    r.add_argument("--kinds", default="python,rust,node")
    r.add_argument("--ids")
    r.add_argument("--subset")
    r.add_argument("--binary", default=str(REPO / "target" / "debug" / "agent-exec"))
    r.add_argument("--out", default="/var/cache/agent-exec-parity/results")
    r.add_argument("--resume", action="store_true")
    for q in (p, r):
        q.add_argument("--cache", default=os.environ.get("PARITY_CACHE", "/var/cache/agent-exec-parity"))
    rp = sub.add_parser("report")
    rp.add_argument("results", nargs="+", help="results.json files; several are merged (e.g. one per ownership)")
    rp.add_argument("--doc")
    rp.add_argument("--notes")
    rp.add_argument("--merged", help="write the merged results.json here")
    ck = sub.add_parser("check")
    ck.add_argument("results")
    ck.add_argument("--floor", default=str(REPO / "evals" / "parity-floor.json"))
    a = ap.parse_args()
    if a.cmd == "check":
        return cmd_check(Path(a.results), Path(a.floor))
    if a.cmd == "prepare":
        prep.prepare(Path(a.cache), kinds=a.kinds.split(","))
        return 0
    if a.cmd == "run":
        return cmd_run(a)
    import parity_report as rep  # noqa: E402
    data = merge([json.loads(Path(p).read_text()) for p in a.results])
    if a.merged:
        Path(a.merged).parent.mkdir(parents=True, exist_ok=True)
        Path(a.merged).write_text(json.dumps(data, indent=1))
    md = rep.markdown(data)
    if a.doc:
        rep.write_doc(Path(a.doc), md)
    if a.notes:
        Path(a.notes).write_text(rep.notes(data))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
