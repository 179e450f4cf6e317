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
    design = [r for r in results if r["category"] == "by_design"]
    if design:
        lines += ["", "Differs by design:", ""]
        for r in design:
            lines.append(f"- `{r['id']}` ({r['owner']}): {r['reason']}")
    refused = [r for r in results if r["category"] == "refused" and not is_negative(r)]
    lines += ["", "Every refusal of an ordinary command (rule: reason):", ""]
    for r in refused:
        reason = re.sub(r"\s+", " ", r["reason"])[:240]
        lines.append(f"- `{r['id']}` ({r['owner']}) `{_short(r['command'])}`: {reason}")
    return "\n".join(lines) + "\n"


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
