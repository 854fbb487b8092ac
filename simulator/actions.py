"""The steps of a simulated schedule: `Action` (what happens) and the names of its kinds.

An action is plain data (`kind`, `node`, `peer`, `msg`, `arg`), compared and hashed on those fields
only, so an action list can be stored, replayed and shrunk. `text` is the story line the world fills
in (what the action is, and after `World.apply`, what came of it); it never takes part in equality.
"""
from __future__ import annotations

from dataclasses import dataclass, field

PRODUCE = "produce"          # node: the client writes one value to it (acks from the settings)
SEND = "send"                # node: a follower sends its next fetch / OffsetsForLeaderEpoch request
DELIVER = "deliver"          # msg: an in-flight message arrives
DROP = "drop"                # msg: an in-flight message is lost
DUPLICATE = "duplicate"      # msg: an in-flight message is copied (both copies may arrive)
HEARTBEAT = "heartbeat"      # node: the broker sends a heartbeat (unregistered: registers again)
EXPIRE = "expire"            # the controller checks sessions (fences brokers silent too long)
METADATA = "metadata"        # node: the controller sends its current metadata to the broker
ALTER_ISR = "alter-isr"      # node: the leader's ISR-shrink timer fires; the proposal goes to the controller
CRASH = "crash"              # node: SIGKILL; flushed and unflushed data both survive
POWER_LOSS = "power-loss"    # node: the unflushed tail of the log is gone
RESTART = "restart"          # node: starts from its disk and registers with the controller
CUT = "cut"                  # node -> peer: messages on that one-way link stop arriving
HEAL = "heal"                # node -> peer: the link works again
ADVANCE = "advance"          # arg: the clock moves arg ms
ELECT = "elect"              # node: admin election of that broker; arg 1: unclean
FLUSH = "flush"              # node: the log is flushed to disk
CHECKPOINT = "checkpoint"    # node: its HW is written to the HW checkpoint file
DAMAGE = "damage"            # node (down, fenced, out of the ISR): its disk loses the log's last record

KINDS = (PRODUCE, SEND, DELIVER, DROP, DUPLICATE, HEARTBEAT, EXPIRE, METADATA, ALTER_ISR, CRASH, POWER_LOSS,
         RESTART, CUT, HEAL, ADVANCE, ELECT, FLUSH, CHECKPOINT, DAMAGE)

CONTROLLER = "c0"            # the controller's name as an endpoint of links


@dataclass(frozen=True, slots=True)
class Action:
    kind: str
    node: str | None = None
    peer: str | None = None
    msg: int | None = None
    arg: int | None = None
    text: str = field(default="", compare=False, repr=False)

    def __str__(self) -> str:
        return self.text or self.short()

    def short(self) -> str:
        """A compact form without the world's description: "deliver #12", "cut n1->c0", "advance 100"."""
        if self.kind in (DELIVER, DROP, DUPLICATE):
            return f"{self.kind} #{self.msg}"
        if self.kind in (CUT, HEAL):
            return f"{self.kind} {self.node}->{self.peer}"
        if self.kind == ADVANCE:
            return f"advance {self.arg} ms"
        if self.kind == EXPIRE:
            return "controller checks sessions"
        if self.kind == ELECT:
            return f"elect {self.node}" + (" (unclean)" if self.arg else "")
        return f"{self.node} {self.kind}"

    def with_text(self, text: str) -> "Action":
        return Action(self.kind, self.node, self.peer, self.msg, self.arg, text)
