"""clusters/ssh_control.RemoteDegradation's bookkeeping of delayer queues, on a stand-in node that records
the shell commands (the real iptables and delayers on containers are tested in test_docker_netem.py):
rules are deleted by the queue they were made with, and links of a setting whose delayer died move to
the replacement's queue."""
from __future__ import annotations

from types import SimpleNamespace

from clusters.ssh_control import RemoteDegradation


class Node:
    def __init__(self):
        self.commands: list[str] = []
        self.alive: set[str] = set()
        self.next_queue = 7
        self.target = SimpleNamespace(where=lambda: "node n2")

    def run(self, command, check=True, timeout_s=None):
        self.commands.append(command)
        out = ""
        if "grep -m1 '^QUEUE '" in command:
            out = f"QUEUE {self.next_queue}\n"
            self.next_queue += 1
        elif "command -v" in command:
            out = "/usr/sbin/iptables\n"
        return SimpleNamespace(exit_status=0, stdout=out)

    def write_file(self, remote, data, mode=0o644):
        pass

    def start_daemon(self, argv, *, cwd, env, stdout, pidfile):
        self.alive.add(pidfile)
        return 1

    def pid_of(self, pidfile):
        return 1 if pidfile in self.alive else None

    def stop_daemon(self, pidfile, *, grace_s=10.0):
        self.alive.discard(pidfile)
        return "stopped"


def test_rules_are_deleted_by_their_own_queue_and_moved_off_a_dead_delayer():
    node = Node()
    deg = RemoteDegradation(node, "run-q", "/r")
    deg.degrade(["10.0.0.2", "10.0.0.3"], 50, 5, 0, seed=1)
    assert {s: link[3] for s, link in deg.links.items()} == {"10.0.0.2": 7, "10.0.0.3": 7}
    node.alive.clear()                                  # the delayer of (50, 5) died
    node.commands.clear()
    deg.degrade(["10.0.0.2"], 50, 5, 2, seed=1)         # a new delayer, queue 8
    deletes = [c for cmd in node.commands for c in cmd.split("; ") if " -D " in c]
    assert deletes and all("--queue-num 7" in c or "-j DROP" in c for c in deletes)
    adds = [c for cmd in node.commands for c in cmd.split(" && ") if " -A " in c]
    assert sorted(a.split(" -s ")[1] for a in adds if "NFQUEUE" in a) == [
        "10.0.0.2/32 -j NFQUEUE --queue-num 8 --queue-bypass", "10.0.0.3/32 -j NFQUEUE --queue-num 8 --queue-bypass"]
    assert deg.links == {"10.0.0.2": (50.0, 5.0, 2.0, 8), "10.0.0.3": (50.0, 5.0, 0.0, 8)}
    node.commands.clear()
    deg.restore(["10.0.0.3"])
    assert [c for cmd in node.commands for c in cmd.split("; ") if " -D " in c] == [
        next(c for c in node.commands[0].split("; ") if " -D " in c)]
    assert "--queue-num 8" in node.commands[0]
