"""Tables from a parity results file: per-category shares for each ownership,
every refusal with its rule and reason, and the negative controls."""

from __future__ import annotations

import collections
import re
from pathlib import Path

CATS = ["same", "by_design", "refused", "broken", "knock_on"]
NEG = ["refused", "contained", "ESCAPED"]
BEGIN = "<!-- parity:begin -->"
END = "<!-- parity:end -->"


def _pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:.1f}%" if d else "-"


def is_negative(r: dict) -> bool:
    return r["id"].startswith("neg-")


def summary(results: list[dict]) -> dict:
    out = {}
    for owner in sorted({r["owner"] for r in results}, key=lambda o: o != "user"):
        pos = [r for r in results if r["owner"] == owner and not is_negative(r)]
        neg = [r for r in results if r["owner"] == owner and is_negative(r)]
        out[owner] = {"positive": collections.Counter(r["category"] for r in pos), "n": len(pos),
                      "negative": collections.Counter(r["category"] for r in neg), "n_neg": len(neg)}
    return out


def markdown(data: dict) -> str:
    meta, results = data["meta"], data["results"]
    s = summary(results)
    owners = list(s)
    lines = [f"Measured at commit `{meta.get('git')}` with `{meta.get('policy')}`; "
             f"{meta.get('commands')} corpus records, {meta.get('seconds')} s. Projects: "
             f"{meta['projects']['python'][0]} {meta['projects']['python'][1]} (sdist, `.venv` with pytest), "
             f"{meta['projects']['rust'][0]} {meta['projects']['rust'][1]} (crate, vendored dependencies), "
             f"{meta['projects']['node'][0]} {meta['projects']['node'][1]} (npm package with its dev dependencies).", "",
             "| category | " + " | ".join(f"{o}-owned project" for o in owners) + " |",
             "|---|" + "---|" * len(owners)]
    label = {"same": "same as bare", "by_design": "differs only by design", "refused": "refused by the policy",
             "broken": "broken by the sandbox", "knock_on": "knock-on of a setup step"}
    for c in CATS:
        lines.append(f"| {label[c]} | " + " | ".join(
            f"{s[o]['positive'][c]} ({_pct(s[o]['positive'][c], s[o]['n'])})" for o in owners) + " |")
    lines.append("| **commands** | " + " | ".join(str(s[o]["n"]) for o in owners) + " |")
    escaped = [r for r in results if r["category"] == "ESCAPED"]
    lines += ["", "| negative controls | " + " | ".join(owners) + " |", "|---|" + "---|" * len(owners)]
    for c in NEG:
        lines.append(f"| {c} | " + " | ".join(str(s[o]["negative"][c]) for o in owners) + " |")
    for r in escaped:
        lines.append(f"\n**ESCAPED** `{r['id']}` ({r['owner']}) `{_short(r['command'])}`: {r['reason']}")
    by_kind = collections.defaultdict(collections.Counter)
    for r in results:
        if not is_negative(r):
            by_kind[(r["owner"], r["project"])][r["category"]] += 1
    lines += ["", "Same-as-bare share per project:", "", "| project | " + " | ".join(owners) + " |",
              "|---|" + "---|" * len(owners)]
    for kind in ("python", "rust", "node"):
        cells = []
        for o in owners:
            c = by_kind[(o, kind)]
            n = sum(c.values())
            cells.append(f"{c['same']}/{n} ({_pct(c['same'], n)})" if n else "-")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    lines += ["", "Everything that did not behave as bare, grouped by cause:", ""] + causes_table(results)
    design = [r for r in results if r["category"] == "by_design"]
    if design:
        lines += ["", "Differs by design:", ""]
        for r in design:
            lines.append(f"- `{r['id']}` ({r['owner']}): {r['reason']}")
    refused = [r for r in results if r["category"] == "refused" and not is_negative(r)]
    lines += ["", "Every refusal of an ordinary command (rule: reason):", ""]
    for r in refused:
        reason = re.sub(r"\s+", " ", r["reason"])[:240]
        # Where this machine keeps the projects is nobody else's business.
        reason = re.sub(r"/var/cache/agent-exec-parity[^\s,]*", "(the project's parent directory)", reason)
        lines.append(f"- `{r['id']}` ({r['owner']}) `{_short(r['command'])}`: {reason}")
    return "\n".join(lines) + "\n"


def cause(r: dict) -> str:
    """A coarse diagnosis of one non-parity result, from the ToolResult."""
    s = r.get("sandbox", {})
    t = (s.get("stderr") or "") + (s.get("stdout") or "") + (s.get("message") or "")
    if r["category"] == "refused":
        m = re.search(r"no rule covers `([^`]*)`", s.get("message") or "")
        return f"refused, no rule covers `{m.group(1)}`" if m else f"refused by `{s.get('rule')}`"
    if r["category"] == "knock_on":
        return "a setup step failed sandboxed"
    if r["category"] == "by_design":
        return f"by design: {r.get('reason')}"
    if s.get("error_type") == "COMMAND_TIMEOUT":
        return "the policy's timeout"
    m = re.search(r"(\S+): not found on the policy's PATH", t) or re.search(r"(\S+): command not found", t)
    if m:
        return f"`{m.group(1)}` not on the policy's PATH"
    if r["command"].startswith("which"):
        return "`which` finds nothing or another program (PATH)"
    m = re.search(r"No module named (\S+)", t)
    if m:
        return f"`python3` is the system interpreter, not the project's venv (no module {m.group(1)})"
    if re.search(r"Permission denied|EACCES|Read-only file system", t):
        return "permission denied writing or executing in the project"
    if re.search(r"Author identity unknown|tell me who you are|user\.email", t, re.I):
        return "git has no identity"
    if re.search(r"^ls\b", r["command"]):
        return "`ls -l` prints numeric owners (no /etc/passwd)"
    return "other (see details)"


def causes_table(results: list[dict]) -> list[str]:
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for r in results:
        if not is_negative(r) and r["category"] != "same":
            groups[cause(r)].append(f"{r['id']}({r['owner'][0]})")
    lines = ["| cause | runs | commands ((u)ser-, (r)oot-owned) |", "|---|---|---|"]
    for k, v in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"| {k} | {len(v)} | {' '.join(v)} |")
    return lines


def _short(cmd: str, n=90) -> str:
    cmd = cmd.replace("\n", " ⏎ ").replace("`", "'")
    return cmd if len(cmd) <= n else cmd[: n - 1] + "…"


def write_doc(path: Path, md: str) -> None:
    text = path.read_text()
    a, b = text.index(BEGIN), text.index(END)
    path.write_text(text[: a + len(BEGIN)] + "\n" + md + text[b:])


def notes(data: dict) -> str:
    """Per-command detail for everything that is not `same`."""
    out = [markdown(data), "", "## Every non-parity command", ""]
    for r in data["results"]:
        if r["category"] in ("same",):
            continue
        out.append(f"### `{r['id']}` ({r['owner']}-owned {r['project']}) — {r['category']}")
        out.append(f"command: `{_short(r['command'], 300)}`  ")
        out.append(f"reason: {r.get('reason', '')}")
        for side in ("bare", "sandbox", "setup_failure"):
            if side in r:
                x = r[side]
                body = (x.get("stdout", "") + ("\n[stderr] " + x["stderr"] if x.get("stderr") else ""))[-700:]
                head = f"{side}: exit={x.get('exit')} error_type={x.get('error_type')} rule={x.get('rule')}"
                out.append(f"\n{head}\n```\n{body.strip()}\n```")
                if x.get("message"):
                    out.append(f"message: {x['message']}")
        out.append("")
    return "\n".join(out)
