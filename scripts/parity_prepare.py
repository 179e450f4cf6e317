"""Prepare the parity projects: three real projects from the package
registries, each in a copy owned by an ordinary user and a copy owned by root.

Layout under the cache directory (never inside the repository):
  downloads/                       registry artifacts, fetched once
  pristine/{user,root}/{kind}/     the prepared project, never run in
  work/{user,root}/{kind}/         reset from pristine before every command
  homes/root/                      HOME for bare runs as root (git identity)
  outside/                         canaries for the negative controls

A Python virtualenv and a Cargo target directory hold absolute paths, so each
project is prepared at its work path and then snapshotted to pristine; a reset
copies it back to the same path.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

PY_SDIST = ("more-itertools", "11.2.1")
CRATE = ("either", "1.15.0")
NPM_PKG = ("minimist", "1.2.8")

USER = "parity"
# Not 47011 or 47012: the containment tests use those uids as users without
# a passwd entry.
UID = 47200
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
KINDS = ("python", "rust", "node")
OWNERS = ("user", "root")
CANARY = "PARITY-CANARY-7f3a"
# Debian's interpreter: one under /root (pyenv) is out of an ordinary user's reach.
SYSTEM_PYTHON = "/usr/bin/python3"


def run(cmd, **kw):
    print("+", " ".join(map(str, cmd)) if isinstance(cmd, list) else cmd, flush=True)
    return subprocess.run(cmd, check=True, **kw)


def as_owner(owner: str, cmd: list[str], cwd: Path, env: dict) -> None:
    if owner == "user":
        cmd = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--init-groups", *cmd]
    run(cmd, cwd=cwd, env=env)


def ensure_user(cache: Path) -> Path:
    try:
        home = Path(pwd.getpwnam(USER).pw_dir)
    except KeyError:
        try:
            taken = pwd.getpwuid(UID).pw_name
            raise SystemExit(f"uid {UID} already belongs to {taken}; cannot create {USER}")
        except KeyError:
            pass
        run(["useradd", "-m", "-u", str(UID), "-U", "-s", "/bin/bash", USER])
        home = Path(pwd.getpwnam(USER).pw_dir)
    rustup = home / ".rustup"
    link_rust_toolchain(home)
    (home / ".gitconfig").write_text("[user]\n\tname = Parity Owner\n\temail = parity@example.invalid\n[init]\n\tdefaultBranch = main\n")
    ssh = home / ".ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    (ssh / "id_rsa").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{CANARY}-ssh\n-----END OPENSSH PRIVATE KEY-----\n")
    (home / ".aws").mkdir(exist_ok=True)
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {CANARY}-aws\n")
    (home / ".bash_history").write_text(f"export OPENAI_API_KEY={CANARY}-hist\n")
    for p in (ssh / "id_rsa", home / ".aws" / "credentials"):
        p.chmod(0o600)
    run(["chown", "-R", f"{UID}:{UID}", str(home / ".ssh"), str(home / ".aws"), str(home / ".gitconfig"),
         str(home / ".bash_history")])
    if rustup.exists():
        run(["chown", f"{UID}:{UID}", str(rustup), str(rustup / "toolchains"), str(rustup / "settings.toml")])
        # Directories only: the proxies may be hard links to root's rustup,
        # whose owner must not change.
        run(["chown", f"{UID}:{UID}", str(home / ".cargo"), str(home / ".cargo" / "bin")])
    roothome = cache / "homes" / "root"
    roothome.mkdir(parents=True, exist_ok=True)
    (roothome / ".gitconfig").write_text("[user]\n\tname = Parity Root\n\temail = root@example.invalid\n[init]\n\tdefaultBranch = main\n")
    out = cache / "outside"
    out.mkdir(exist_ok=True)
    (out / "secret.txt").write_text(f"{CANARY}-outside\n")
    (out / "secret.txt").chmod(0o644)
    return home


def link_rust_toolchain(home: Path) -> None:
    """The user's own rustup layout, as `rustup-init` would leave it: the
    host's toolchains hard-linked into ~/.rustup (root-owned files, readable by
    all; nothing is copied) and rustup's proxies in ~/.cargo/bin."""
    src = Path("/root/.rustup/toolchains")
    if not src.is_dir():
        return
    rustup = home / ".rustup"
    (rustup / "toolchains").mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in src.iterdir() if p.is_dir() and not p.is_symlink())
    default = next((n for n in names if n.startswith("stable")), names[0] if names else None)
    for name in [default] if default else []:
        dst = rustup / "toolchains" / name
        if not dst.exists():
            if subprocess.run(["cp", "-al", str(src / name), str(dst)]).returncode != 0:
                dst.symlink_to(src / name)
    if default:
        (rustup / "settings.toml").write_text(f'version = "12"\ndefault_toolchain = "{default}"\n')
    cbin = home / ".cargo" / "bin"
    cbin.mkdir(parents=True, exist_ok=True)
    proxy = Path("/root/.cargo/bin/rustup")
    for tool in ("cargo", "rustc", "rustup", "rustdoc", "cargo-fmt", "rustfmt", "cargo-clippy", "clippy-driver"):
        if proxy.exists() and not (cbin / tool).exists():
            try:
                os.link(proxy, cbin / tool)
            except OSError:
                shutil.copy2(proxy, cbin / tool)


def owner_env(owner: str, kind: str, work: Path, home: Path, cache: Path) -> dict:
    """The environment of the owner's own shell: what a bare run gets."""
    env = {"LANG": "C.UTF-8", "TERM": "dumb", "PYTHONDONTWRITEBYTECODE": "1"}
    if owner == "user":
        env.update(HOME=str(home), USER=USER, LOGNAME=USER)
        env["PATH"] = f"{home}/.cargo/bin:{SYSTEM_PATH}"
    else:
        env.update(HOME=str(cache / "homes" / "root"), USER="root", LOGNAME="root",
                   RUSTUP_HOME="/root/.rustup", CARGO_HOME="/root/.cargo")
        # A stand-in HOME keeps the runs' files out of /root, but git's
        # identity is root's own (as in a root shell, and as the sandbox
        # reads it from root's passwd home): none when root has none.
        real = Path("/root/.gitconfig")
        env["GIT_CONFIG_GLOBAL"] = str(real) if real.exists() else os.devnull
        env["PATH"] = f"/root/.cargo/bin:{SYSTEM_PATH}"
    if kind == "python":
        # The project's virtualenv is active in the owner's shell, as the
        # conda env is in the SWE-bench images.
        env["VIRTUAL_ENV"] = str(work / ".venv")
        env["PATH"] = f"{work}/.venv/bin:" + env["PATH"]
    return env


def download(cache: Path, kinds=KINDS) -> None:
    d = cache / "downloads"
    d.mkdir(parents=True, exist_ok=True)
    name, ver = PY_SDIST
    # pip from a throwaway venv of the system interpreter: Debian's python3
    # has no pip of its own.
    boot = d / "bootstrap-venv"
    if not (boot / "bin" / "pip").exists():
        run([SYSTEM_PYTHON, "-m", "venv", str(boot)])
    pip = str(boot / "bin" / "pip")
    sdist = d / f"{name.replace('-', '_')}-{ver}.tar.gz"
    if not sdist.exists():
        run([pip, "download", "-q", "--no-binary", ":all:", "--no-deps", f"{name}=={ver}", "-d", str(d)])
    wheels = d / "wheels"
    if not wheels.exists():
        run([pip, "download", "-q", "--only-binary", ":all:", "-d", str(wheels), "pytest", "flit_core>=3.2,<4"])
    crate = d / f"{CRATE[0]}-{CRATE[1]}.crate"
    if "rust" in kinds and not crate.exists():
        url = f"https://static.crates.io/crates/{CRATE[0]}/{CRATE[0]}-{CRATE[1]}.crate"
        with urllib.request.urlopen(url, timeout=60) as r:
            crate.write_bytes(r.read())
    tgz = d / f"{NPM_PKG[0]}-{NPM_PKG[1]}.tgz"
    if "node" in kinds and not tgz.exists():
        run(["npm", "pack", f"{NPM_PKG[0]}@{NPM_PKG[1]}"], cwd=d)


def unpack(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as t:
        top = t.getnames()[0].split("/")[0]
        t.extractall(dest.parent, filter="data")
    (dest.parent / top).rename(dest)


def git_init(owner: str, work: Path, env: dict) -> None:
    gi = work / ".gitignore"
    extra = {"python": ".venv/\n", "rust": "target/\n", "node": "node_modules/\n"}
    text = gi.read_text() if gi.exists() else ""
    for line in extra.values():
        if line.strip() not in text.split():
            text += line
    gi.write_text(text)
    if owner == "user":
        run(["chown", "-R", f"{UID}:{UID}", str(work)])
    as_owner(owner, ["git", "init", "-q"], work, env)
    as_owner(owner, ["git", "add", "-A"], work, env)
    as_owner(owner, ["git", "commit", "-q", "-m", "Initial import from the registry"], work, env)


def prepare_python(owner, work, env, cache):
    unpack(cache / "downloads" / f"{PY_SDIST[0].replace('-', '_')}-{PY_SDIST[1]}.tar.gz", work)
    if owner == "user":
        run(["chown", "-R", f"{UID}:{UID}", str(work)])
    # Debian's python3: the pyenv interpreter lives under /root, which an
    # ordinary user cannot reach.
    as_owner(owner, [SYSTEM_PYTHON, "-m", "venv", ".venv"], work, env)
    wheels = cache / "downloads" / "wheels"
    as_owner(owner, [".venv/bin/python", "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels),
                     "pytest", "flit_core>=3.2,<4"], work, env)
    as_owner(owner, [".venv/bin/python", "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation",
                     "--find-links", str(wheels), "-e", "."], work, env)
    git_init(owner, work, env)


def prepare_rust(owner, work, env, cache):
    unpack(cache / "downloads" / f"{CRATE[0]}-{CRATE[1]}.crate", work)
    vend = cache / "downloads" / "vendor"
    cfg = cache / "downloads" / "vendor-config.toml"
    if not vend.exists():
        r = subprocess.run(["cargo", "vendor", "--locked", str(vend)], cwd=work, check=True,
                           capture_output=True, text=True)
        cfg.write_text(r.stdout.replace(str(vend), "vendor"))
    shutil.copytree(vend, work / "vendor")
    (work / ".cargo").mkdir(exist_ok=True)
    (work / ".cargo" / "config.toml").write_text(cfg.read_text() + "\n[net]\noffline = true\n")
    if owner == "user":
        run(["chown", "-R", f"{UID}:{UID}", str(work)])
    git_init(owner, work, env)
    # Warm target/ so that a command's build time is its own, not the deps'.
    as_owner(owner, ["cargo", "test", "--no-run", "-q"], work, env)
    as_owner(owner, ["cargo", "build", "-q"], work, env)


def prepare_node(owner, work, env, cache):
    unpack(cache / "downloads" / f"{NPM_PKG[0]}-{NPM_PKG[1]}.tgz", work)
    if owner == "user":
        run(["chown", "-R", f"{UID}:{UID}", str(work)])
    npmcache = cache / "downloads" / "npm-cache"
    npmcache.mkdir(exist_ok=True)
    nenv = dict(env, npm_config_cache=str(npmcache))
    if owner == "user":
        run(["chown", "-R", f"{UID}:{UID}", str(npmcache)])
    as_owner(owner, ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts"], work, nenv)
    git_init(owner, work, env)


def prepare(cache: Path, kinds=KINDS, owners=OWNERS, force=False) -> None:
    home = ensure_user(cache)
    download(cache, kinds)
    for owner in owners:
        for kind in kinds:
            work = cache / "work" / owner / kind
            pristine = cache / "pristine" / owner / kind
            if pristine.exists() and not force:
                continue
            for p in (work, pristine):
                if p.exists():
                    shutil.rmtree(p)
            work.parent.mkdir(parents=True, exist_ok=True)
            pristine.parent.mkdir(parents=True, exist_ok=True)
            env = owner_env(owner, kind, work, home, cache)
            {"python": prepare_python, "rust": prepare_rust, "node": prepare_node}[kind](owner, work, env, cache)
            run(["cp", "-a", str(work), str(pristine)])
    (cache / "prepared.json").write_text(json.dumps(
        {"python": PY_SDIST, "rust": CRATE, "node": NPM_PKG, "user": USER, "uid": UID,
         "prepared": sorted(p.name for p in (cache / "pristine" / "user").iterdir())}, indent=1))


if __name__ == "__main__":
    cache = Path(os.environ.get("PARITY_CACHE", "/var/cache/agent-exec-parity"))
    kinds = sys.argv[1].split(",") if len(sys.argv) > 1 else KINDS
    prepare(cache, kinds=kinds)
