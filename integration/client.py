#!/usr/bin/env python3
"""Reference client for `agent-exec serve` (Python standard library only).

The protocol (docs/protocol.md): newline-delimited JSON over a Unix stream
socket. Each request carries an `id`; each answer is one ToolResult echoing
it. Answers may arrive in any order, so this client keeps one reader thread
that routes every answer to the caller waiting on its id.

    client = Client("/run/agent-exec/agent-exec.sock")
    print(client.describe()["policy"])
    r = client.run_shell("ls -l", session="task-1")
    r = client.run_shell("git commit -qm 'fix'", session="task-1", retries=3)
    client.close()

Idempotency keys: `run_shell` makes a fresh key for every logical call
(unless given one) and sends that same key again when it retries the call
after a `BUSY` answer, so a retried commit is applied once. The daemon
requires a key only for calls its policy marks `needs_key` (commits and
the like); ordinary calls with a key are deduplicated all the same.

Command line:

    client.py --socket PATH describe
    client.py --socket PATH run 'echo hi' [--key KEY] [--session S] [--timeout-ms N]
    client.py --socket PATH session        # one command per stdin line
    client.py --socket PATH --self-test    # used by the test suite
"""

import argparse
import itertools
import json
import socket
import sys
import threading
import time
import uuid


class DaemonGone(Exception):
    """The connection closed before the answer arrived.

    When the daemon said why before hanging up (too many connections, a
    request line over the limit, a client that is one of its own runs),
    its answer is in `reason` and in the message."""

    def __init__(self, message, reason=None):
        if reason is not None:
            message = "%s: %s: %s" % (message, reason.get("error_type"), reason.get("message"))
        super().__init__(message)
        self.reason = reason


class Client:
    def __init__(self, path, timeout=None):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiting = {}  # id -> [threading.Event, answer]
        self._stray = []  # answers without a usable id (unparseable requests)
        self._closed = False
        self._close_reason = None  # the last id-less answer before the end
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # -- transport -------------------------------------------------------
    def _read_loop(self):
        buf = b""
        try:
            while True:
                chunk = self._sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        self._deliver(json.loads(line))
        except OSError:
            pass
        finally:
            with self._lock:
                self._closed = True
                if self._stray:
                    self._close_reason = self._stray[-1]
                for slot in self._waiting.values():
                    slot[0].set()

    def _deliver(self, answer):
        key = json.dumps(answer.get("id"))
        with self._lock:
            slot = self._waiting.get(key)
            if slot is None:
                self._stray.append(answer)
                return
            slot[1] = answer
            slot[0].set()

    def send_raw(self, data):
        """Sends bytes as they are (for tests of malformed input)."""
        self._sock.sendall(data)

    def request(self, tool, args=None, session=None, idempotency_key=None, request_id=None):
        """Sends one request and blocks until its answer arrives."""
        if request_id is None:
            request_id = "py-%d" % next(self._ids)
        msg = {"id": request_id, "tool": tool}
        if args is not None:
            msg["args"] = args
        if session is not None:
            msg["session"] = session
        if idempotency_key is not None:
            msg["idempotency_key"] = idempotency_key
        key = json.dumps(request_id)
        event = threading.Event()
        with self._lock:
            if self._closed:
                raise DaemonGone("connection closed", self._close_reason)
            self._waiting[key] = [event, None]
        try:
            try:
                self._sock.sendall(json.dumps(msg).encode() + b"\n")
            except OSError:
                # Refused at connection time: the reason may still be on
                # its way to the reader.
                self._reader.join(5)
                raise DaemonGone("connection closed", self._close_reason)
            if not event.wait(self._timeout):
                raise TimeoutError("no answer for %r" % (request_id,))
            with self._lock:
                answer = self._waiting[key][1]
            if answer is None:
                raise DaemonGone("connection closed before the answer to %r" % (request_id,),
                                 self._close_reason)
            return answer
        finally:
            with self._lock:
                self._waiting.pop(key, None)

    def next_stray(self, timeout=30):
        """The next answer that carried no id (a line that was not JSON)."""
        for _ in range(int(timeout * 100)):
            with self._lock:
                if self._stray:
                    return self._stray.pop(0)
            threading.Event().wait(0.01)
        raise TimeoutError("no answer without id")

    def close(self):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    # -- tools -----------------------------------------------------------
    def describe(self):
        """The tool schema, policy name/hash and limits (a dict)."""
        answer = self.request("describe")
        if not answer.get("ok"):
            raise RuntimeError(answer.get("message"))
        return json.loads(answer["stdout"])

    @staticmethod
    def new_key():
        """A fresh idempotency key: one per logical call, reused on its retries."""
        return "py-" + uuid.uuid4().hex

    def run_shell(self, command, cwd=None, timeout_ms=None, stdin=None, output_chars=None,
                  session=None, idempotency_key=None, request_id=None, retries=0):
        """Runs one command. Every call carries an idempotency key (a fresh
        one unless given), and a retry after `BUSY` sends the same key, so
        the daemon applies the call at most once."""
        args = {"command": command}
        for name, value in (("cwd", cwd), ("timeout_ms", timeout_ms), ("stdin", stdin),
                            ("output_chars", output_chars)):
            if value is not None:
                args[name] = value
        key = idempotency_key if idempotency_key is not None else self.new_key()
        for attempt in range(retries + 1):
            answer = self.request("run_shell", args, session=session,
                                  idempotency_key=key, request_id=request_id)
            if answer.get("error_type") != "BUSY" or attempt == retries:
                return answer
            time.sleep(min(0.05 * 2 ** attempt, 1.0))
        return answer


def self_test(client, prefix):
    """A short agent session exercising the protocol; raises on any surprise."""
    def check(cond, what, answer=None):
        if not cond:
            raise AssertionError("%s: %s" % (what, json.dumps(answer)))

    info = client.describe()
    check("run_shell" in json.dumps(info), "describe names the tool", info)

    r = client.run_shell("echo hello-from-python")
    check(r.get("ok") and "hello-from-python" in r["stdout"], "echo runs", r)

    key = "%s-touch" % prefix
    first = client.run_shell("touch made-by-client.txt", idempotency_key=key, session=prefix)
    check(first.get("ok"), "mutating call with a key runs", first)
    again = client.run_shell("touch made-by-client.txt", idempotency_key=key, session=prefix)
    check(again.get("duplicate") is True, "the repeated key answers the stored result", again)

    # Without a key of the caller's, each logical call gets its own: the
    # same command sent twice runs twice.
    one = client.run_shell("touch auto-key.txt", session=prefix)
    two = client.run_shell("touch auto-key.txt", session=prefix)
    check(one.get("ok") and two.get("ok") and not two.get("duplicate"),
          "calls without a given key are distinct calls", two)
    check(Client.new_key() != Client.new_key(), "keys are fresh")

    bad = client.request("run_shell", {"command": "echo x", "timeout_ms": "5"})
    check(bad.get("error_type") == "INVALID_ARGUMENTS" and "args.timeout_ms" in bad["message"],
          "a string timeout is refused", bad)

    client.send_raw(b"not json\n")
    stray = client.next_stray()
    check(stray.get("error_type") == "INVALID_ARGUMENTS", "a non-JSON line is refused", stray)

    client.send_raw(b'{"tool":"describe","tool":"run_shell","args":{"command":"touch x"}}\n')
    stray = client.next_stray()
    check(stray.get("error_type") == "INVALID_ARGUMENTS"
          and stray["message"].startswith("tool: duplicate key"),
          "a repeated key is refused", stray)

    # Several calls in flight on one connection.
    results = [None] * 8
    def worker(i):
        results[i] = client.run_shell("echo parallel-%d" % i)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, r in enumerate(results):
        check(r and ("parallel-%d" % i) in r["stdout"], "parallel call %d" % i, r)

    denied = client.run_shell("cp /etc/hostname stolen.txt")
    check(denied.get("error_type") == "PERMISSION_DENIED", "a denied command is refused", denied)
    print("self-test passed")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--socket", required=True)
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait for each answer")
    p.add_argument("--self-test", action="store_true")
    p.add_argument("--key-prefix", default="selftest")
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("describe")
    run = sub.add_parser("run")
    run.add_argument("command")
    run.add_argument("--key")
    run.add_argument("--session")
    run.add_argument("--cwd")
    run.add_argument("--timeout-ms", type=int)
    sub.add_parser("session", help="run one command per stdin line, print each answer")
    a = p.parse_args(argv)

    client = Client(a.socket, timeout=a.timeout)
    try:
        if a.self_test:
            self_test(client, a.key_prefix)
            return 0
        if a.cmd == "describe":
            print(json.dumps(client.describe(), indent=2))
            return 0
        if a.cmd == "run":
            r = client.run_shell(a.command, cwd=a.cwd, timeout_ms=a.timeout_ms,
                                 session=a.session, idempotency_key=a.key, retries=3)
            print(json.dumps(r))
            return 0 if r.get("ok") else 1
        if a.cmd == "session":
            for n, line in enumerate(sys.stdin, 1):
                line = line.strip()
                if line:
                    print(json.dumps(client.run_shell(line, request_id=n)), flush=True)
            return 0
        p.print_help()
        return 2
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
