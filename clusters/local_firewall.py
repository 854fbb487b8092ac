"""Kernel packet drops for one run's loopback addresses: an iptables chain or an nft table owned by the run.

iptables (preferred when present): chain `HW-<8 hex>` in the filter table, jumped to from the top of
INPUT by a rule carrying the comment `highwater:<run_id> owner=<pid>:<start time>` (the process that
installed it, so `highwater cleanup` can tell a live run's chain whatever registry holds the run); each
one-way drop is
`-s SRC/32 -d DST/32 -j DROP` inside that chain. Heal flushes the chain; a partial heal (`heal(pairs)`)
deletes only the rules of those pairs (every copy, when a pair was dropped twice); remove deletes the
jump and the chain. nft (when iptables is missing): table `inet highwater_<8 hex>` (its comment names
the owner as above, where nft supports table comments) with its own input base chain; heal flushes it,
a partial heal deletes the matching rules by their handles; remove deletes the table. No other rule,
chain or table is ever touched.

Drops happen on INPUT (the receiving side), as on a real lossy network: the sender's send succeeds and
the packet vanishes. (An OUTPUT drop would instead fail the sender's syscall with EPERM, which no real
network partition does.) Loopback packets traverse INPUT, so this works for 127.x addresses.

`find_leftovers()` / `remove_object()` serve `highwater cleanup`: they list and delete every highwater
chain or table, whoever made it, the degradation chains `HWN-<8 hex>` of the mangle table
(clusters/local_netem.py) included; a chain's listing carries the owner named by its jump comment.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from clusters.base import ClusterError
from clusters.run_registry import this_process_identity

CHAIN_RE = re.compile(r"^HW-[0-9a-f]{8}$")
NETEM_CHAIN_RE = re.compile(r"^HWN-[0-9a-f]{8}$")   # the degradation chain (clusters/local_netem.py)
CHAINS = {"filter": CHAIN_RE, "mangle": NETEM_CHAIN_RE}  # table -> the highwater chains it may hold
TABLE_RE = re.compile(r"^highwater_[0-9a-f]{8}$")
COMMENT_PREFIX = "highwater:"
OWNER_RE = re.compile(r" owner=(\d+):(\d+)$")
HOOKS_IPTABLES = ("INPUT",)
HOOKS_NFT = ("input",)


def short_id(run_id: str) -> str:
    return hashlib.sha1(run_id.encode()).hexdigest()[:8]


def _run(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise ClusterError(f"firewall command failed ({r.returncode}): {' '.join(argv)}: "
                           f"{(r.stderr or r.stdout).strip()}")
    return r


def available_tool() -> str:
    """'iptables' or 'nft', or raise ClusterError naming what is missing."""
    if os.geteuid() != 0:
        raise ClusterError(f"the partition fault needs root to install packet-drop rules "
                                  f"(running as uid {os.geteuid()})")
    if shutil.which("iptables"):
        return "iptables"
    if shutil.which("nft"):
        return "nft"
    raise ClusterError("the partition fault needs iptables or nft on PATH; neither was found "
                              "(install the Debian package 'iptables' or 'nftables')")


@dataclass
class Firewall:
    """Base of the two implementations; `describe()` is what the registry stores."""
    run_id: str

    @property
    def comment(self) -> str:
        """The comment on this run's rules: the run and the process that owns them."""
        pid, start = this_process_identity()
        return f"{COMMENT_PREFIX}{self.run_id[:200]} owner={pid}:{start}"

    def install(self) -> None: ...
    def drop(self, pairs: list[tuple[str, str]]) -> None: ...
    def heal(self, pairs: list[tuple[str, str]] | None = None) -> None:
        """Remove every drop rule (pairs None), or only the rules dropping those (src, dst) addresses."""
    def remove(self) -> None: ...
    def describe(self) -> dict: ...


class IptablesFirewall(Firewall):
    @property
    def chain(self) -> str:
        return f"HW-{short_id(self.run_id)}"

    def install(self) -> None:
        if _run(["iptables", "-w", "-n", "-L", self.chain], check=False).returncode != 0:
            _run(["iptables", "-w", "-N", self.chain])
        for hook in HOOKS_IPTABLES:
            jump = [hook, "-m", "comment", "--comment", self.comment, "-j", self.chain]
            if _run(["iptables", "-w", "-C", *jump], check=False).returncode != 0:
                _run(["iptables", "-w", "-I", hook, "1", *jump[1:]])

    def drop(self, pairs: list[tuple[str, str]]) -> None:
        for src, dst in pairs:
            _run(["iptables", "-w", "-A", self.chain, "-s", f"{src}/32", "-d", f"{dst}/32", "-j", "DROP"])

    def heal(self, pairs: list[tuple[str, str]] | None = None) -> None:
        if pairs is None:
            _run(["iptables", "-w", "-F", self.chain], check=False)
            return
        for src, dst in pairs:  # -D deletes one copy a call: repeat until none is left
            rule = [self.chain, "-s", f"{src}/32", "-d", f"{dst}/32", "-j", "DROP"]
            while _run(["iptables", "-w", "-D", *rule], check=False).returncode == 0:
                pass

    def remove(self) -> None:
        remove_iptables_chain(self.chain)

    def rules(self) -> list[str]:
        r = _run(["iptables", "-w", "-S", self.chain], check=False)
        return [line for line in r.stdout.splitlines() if line.startswith("-A ")]

    def describe(self) -> dict:
        return {"kind": "iptables", "chain": self.chain}


class NftFirewall(Firewall):
    @property
    def table(self) -> str:
        return f"highwater_{short_id(self.run_id)}"

    @property
    def comment(self) -> str:
        return super().comment.replace('"', "")  # it stands inside a quoted nft string

    def install(self) -> None:
        if _run(["nft", "add", "table", "inet", self.table, "{ comment \"" + self.comment + "\" ; }"],
                check=False).returncode != 0:  # an nft without table comments (before 0.9.7)
            _run(["nft", "add", "table", "inet", self.table])
        for hook in HOOKS_NFT:
            _run(["nft", "add", "chain", "inet", self.table, hook,
                  "{ type filter hook " + hook + " priority -10 ; policy accept ; }"])

    def drop(self, pairs: list[tuple[str, str]]) -> None:
        for src, dst in pairs:
            _run(["nft", "add", "rule", "inet", self.table, "input",
                  "ip", "saddr", src, "ip", "daddr", dst, "drop"])

    def heal(self, pairs: list[tuple[str, str]] | None = None) -> None:
        if pairs is None:
            for hook in HOOKS_NFT:
                _run(["nft", "flush", "chain", "inet", self.table, hook], check=False)
            return
        wanted = {f"ip saddr {src} ip daddr {dst} drop" for src, dst in pairs}
        for hook in HOOKS_NFT:
            listing = _run(["nft", "-a", "list", "chain", "inet", self.table, hook], check=False).stdout
            for line in listing.splitlines():
                rule, sep, handle = line.strip().rpartition(" # handle ")
                if sep and rule in wanted:
                    _run(["nft", "delete", "rule", "inet", self.table, hook, "handle", handle])

    def remove(self) -> None:
        _run(["nft", "delete", "table", "inet", self.table], check=False)

    def rules(self) -> list[str]:
        r = _run(["nft", "list", "chain", "inet", self.table, "input"], check=False)
        return [line.strip() for line in r.stdout.splitlines() if line.strip().endswith("drop")]

    def describe(self) -> dict:
        return {"kind": "nft", "table": self.table}


def make_firewall(run_id: str, tool: str | None = None) -> Firewall:
    tool = tool or available_tool()
    if tool == "iptables":
        return IptablesFirewall(run_id)
    if tool == "nft":
        return NftFirewall(run_id)
    raise ClusterError(f"unknown firewall tool {tool!r} (expected 'iptables' or 'nft')")


# --- leftovers (highwater cleanup) -----------------------------------------------------------------

def remove_iptables_chain(chain: str, table: str = "filter") -> None:
    """Delete every rule jumping to `chain` (in any chain of `table`), then flush and delete it."""
    if table not in CHAINS or not CHAINS[table].match(chain):
        raise ValueError(f"refusing to touch non-highwater chain {chain!r}" +
                         (f" in table {table!r}" if table != "filter" else ""))
    t = ["-t", table]
    listing = _run(["iptables", "-w", *t, "-S"], check=False).stdout.splitlines()
    for line in listing:
        parts = line.split()
        if len(parts) > 2 and parts[0] == "-A" and "-j" in parts and parts[parts.index("-j") + 1] == chain:
            _run(["iptables", "-w", *t, "-D", *_unquote(line[3:])], check=False)
    _run(["iptables", "-w", *t, "-F", chain], check=False)
    _run(["iptables", "-w", *t, "-X", chain], check=False)


def _unquote(rule: str) -> list[str]:
    import shlex
    return shlex.split(rule)


def find_leftovers() -> list[dict]:
    """Every highwater firewall object present: [{"kind": "iptables", "chain": ...} | {"kind": "nft", ...}]."""
    found: list[dict] = []
    if os.geteuid() != 0:
        return found
    if shutil.which("iptables"):
        for table, chain_re in CHAINS.items():
            out = _run(["iptables", "-w", "-t", table, "-S"], check=False).stdout.splitlines()
            chains = {line.split()[1] for line in out if line.startswith("-N ") and chain_re.match(line.split()[1])}
            owners = {}
            for line in out:  # the jump rule's comment names the process that owns the chain
                parts = _unquote(line) if line.startswith("-A ") and "--comment" in line else []
                if "-j" in parts and parts[parts.index("-j") + 1] in chains:
                    m = OWNER_RE.search(parts[parts.index("--comment") + 1])
                    if m:
                        owners[parts[parts.index("-j") + 1]] = [int(m.group(1)), int(m.group(2))]
            found += [{"kind": "iptables", "chain": c, **({"table": table} if table != "filter" else {}),
                       **({"owner": owners[c]} if c in owners else {})}
                      for c in sorted(chains)]
    if shutil.which("nft"):
        out = _run(["nft", "list", "tables"], check=False).stdout.splitlines()
        for line in out:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "table" and TABLE_RE.match(parts[2]):
                obj = {"kind": "nft", "family": parts[1], "table": parts[2]}
                listing = _run(["nft", "list", "table", parts[1], parts[2]], check=False).stdout
                m = re.search(r'^\s*comment "([^"]*)"', listing, re.M)
                owner = OWNER_RE.search(m.group(1)) if m else None
                if owner:
                    obj["owner"] = [int(owner.group(1)), int(owner.group(2))]
                found.append(obj)
    return found


def remove_object(obj: dict) -> None:
    if obj["kind"] == "iptables":
        remove_iptables_chain(obj["chain"], obj.get("table", "filter"))
    elif obj["kind"] == "nft":
        if not TABLE_RE.match(obj["table"]):
            raise ValueError(f"refusing to touch non-highwater table {obj['table']!r}")
        _run(["nft", "delete", "table", obj.get("family", "inet"), obj["table"]], check=False)
