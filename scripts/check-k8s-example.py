"""Checks the Kubernetes sidecar example for the mistakes that would make it
fail to start: a mount of an undeclared volume, a socket path outside the
volume both containers share, a policy path that is not mounted.

Usage: check-k8s-example.py contrib/kubernetes/sidecar.yaml [POLICY_OUT]

With POLICY_OUT, the policy in the ConfigMap is written there, for
`agent-exec policy validate`.
"""
import sys

from ruamel.yaml import YAML


def arg_value(args, name):
    for a in args:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    raise SystemExit(f"daemon args lack {name}=")


def mount_of(container, path):
    for m in container.get("volumeMounts", []):
        if path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/"):
            return m["name"]
    return None


def main(path, policy_out):
    docs = [d for d in YAML(typ="safe").load_all(open(path)) if d]
    pods = [d for d in docs if d.get("kind") == "Pod"]
    if len(pods) != 1:
        raise SystemExit("expected one Pod")
    spec = pods[0]["spec"]
    volumes = {v["name"] for v in spec["volumes"]}
    containers = {c["name"]: c for c in spec["containers"]}
    for c in spec["containers"] + spec.get("initContainers", []):
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes:
                raise SystemExit(f"{c['name']} mounts undeclared volume {m['name']}")
    daemon, agent = containers["agent-exec"], containers["agent"]
    sock = arg_value(daemon["args"], "--socket")
    shared = mount_of(daemon, sock)
    if shared is None or mount_of(agent, sock) != shared:
        raise SystemExit(f"socket {sock} is not on a volume both containers mount")
    agent_sock = {e["name"]: e["value"] for e in agent.get("env", [])}.get("AGENT_EXEC_SOCKET")
    if agent_sock != sock:
        raise SystemExit(f"agent's AGENT_EXEC_SOCKET {agent_sock} != daemon's {sock}")
    for opt in ("--policy", "--root", "--state"):
        if mount_of(daemon, arg_value(daemon["args"], opt)) is None:
            raise SystemExit(f"daemon {opt} is on no volume")
    if policy_out:
        maps = [d for d in docs if d.get("kind") == "ConfigMap"]
        open(policy_out, "w").write(maps[0]["data"]["policy.toml"])
    print(f"check-k8s-example: {path}: ok ({len(docs)} documents)")


main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
