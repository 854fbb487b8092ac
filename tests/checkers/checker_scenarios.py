"""Hand-built tiny runs, one per situation, each with the exact findings it must produce.

Every scenario writes into one partition `p` with its own client processes, so several scenarios can
share one run directory (the Spark test checks them all in one go). A scenario returns
{"counts": {kind: n}, "examples": {kind: [example, ...]}, "unseen": n, "reason": why, "unseen_values": [v, ...],
 "loss_shape": {class: {"writes": n, "runs": r}}};
kinds not named must be 0; loss_shape classes not named (all of them when it is absent) must be 0.
Times are the builder's: operation i happens at (i + 1) ms.
"""
from __future__ import annotations

from simulated_runs import Replica, RunBuilder

import group_ops as g

MS = 1_000_000


def T(i: int) -> int:
    return (i + 1) * MS


def _rep(values, epoch=1, hw=None):
    recs = [(v, e) for v, e in values] if values and isinstance(values[0], tuple) else [(v, epoch) for v in values]
    return Replica(recs, len(recs) if hw is None else hw)


def _holds(log_nodes=("n1", "n2", "n3"), **where):
    return {n: {"value_at": where.get(n)} for n in log_nodes}


def _n3_diverges(b: RunBuilder, p: int, n3_records, hw: int) -> None:
    """Values 0, 1, 2 sent and finally read; n1 and n2 hold them, n3 holds `n3_records` with HW `hw`."""
    P = 100 * p
    for k in range(3):
        b.send(P + 1, p, k, offset=k)
    log = [0, 1, 2]
    b.final(p, log, process=P + 9, replicas={"n1": _rep(log), "n2": _rep(log), "n3": _rep(n3_records, hw=hw)})


def clean(b: RunBuilder, p: int) -> dict:
    P = 100 * p
    for k in range(3):
        b.send(P + 1, p, 10 + k, offset=k)
    b.assign(P + 2, p, 0)
    b.poll(P + 2, p, 0, [(0, 10), (1, 11)], hw=3)
    b.poll(P + 2, p, 2, [(2, 12)], hw=3)
    b.poll(P + 2, p, 3, [], hw=3)
    b.final(p, [10, 11, 12], process=P + 9)
    return {"counts": {}, "examples": {}}


def tricky_clean(b: RunBuilder, p: int) -> dict:
    """info present / absent, failed absent, an uncommitted offset truncated and rewritten (never acked),
    and a new leader whose HW lags the old one's (cross-epoch, not failing)."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)                      # ok at 0
    b.send(P + 1, p, 2, outcome="info")                 # present at 1
    b.send(P + 2, p, 3, outcome="info")                 # absent
    b.send(P + 3, p, 4, outcome="fail")                 # absent
    b.send(P + 4, p, 5, outcome="info")                 # was at 2 uncommitted, truncated
    b.send(P + 5, p, 6, offset=2, epoch=2)              # 2 rewritten in epoch 2, acked
    b.assign(P + 6, p, 0)
    first = b.poll(P + 6, p, 0, [(0, 1), (1, 2)], hw=2, epoch=1)
    lag = b.poll(P + 6, p, 2, [], hw=1, epoch=2)        # the new leader's HW lags
    b.poll(P + 6, p, 2, [(2, 6)], hw=3, epoch=2)
    b.final(p, [1, 2, 6], epoch=2, process=P + 9,
            replicas={n: _rep([(1, 1), (2, 1), (6, 2)]) for n in ("n1", "n2", "n3")})
    return {"counts": {"hw-regression-cross-epoch": 1}, "examples": {"hw-regression-cross-epoch": [
        {"partition": p, "epoch": 2, "hw": 1, "index": lag, "time": T(lag), "process": str(P + 6),
         "invoke_index": lag - 1, "f": "poll",
         "previous": {"hw": 2, "index": first, "epoch": 1, "time": T(first), "process": str(P + 6)}}]}}


def lost_write(b: RunBuilder, p: int) -> dict:
    """v2 acked at 1 in epoch 1, truncated by a leader change, offset 1 rewritten with v3 (acked): v3,
    invoked after v2's ack, got v2's offset (realtime-order)."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)
    s2 = b.send(P + 1, p, 2, offset=1)
    s3 = b.send(P + 2, p, 3, offset=1, epoch=2)
    b.final(p, [1, 3], epoch=2, process=P + 9, chunk=5,
            replicas={"n1": _rep([(1, 1), (3, 2)]), "n2": _rep([(1, 1), (3, 2)]), "n3": _rep([(1, 1), (3, 2)])})
    fr = b.ops[-2]["index"]  # the final-read completion
    at1 = {"value": 3, "epoch": 2, "crc_ok": True}
    return {"counts": {"lost-write": 1, "inconsistent-offset": 1, "realtime-order": 1},
            # acknowledged sequence v1@0, v2@1 (lost), v3@1: ties at an offset go by history index
            "loss_shape": {"middle": {"writes": 1, "runs": 1}}, "examples": {
        "lost-write": [{"partition": p, "value": 2, "offset": 1, "epoch": 1, "index": s2, "time": T(s2),
                        "process": str(P + 1), "invoke_index": s2 - 1, "final_values_at_offset": [3],
                        "replicas": {n: {"value_at": None, "at_offset": at1} for n in ("n1", "n2", "n3")}}],
        "inconsistent-offset": [{"partition": p, "offset": 1, "values": [2, 3], "epochs": [1, 2], "index": s2,
                                 "observations": [
            {"source": "send", "value": 2, "epoch": 1, "index": s2, "time": T(s2), "process": str(P + 1)},
            {"source": "send", "value": 3, "epoch": 2, "index": s3, "time": T(s3), "process": str(P + 2)},
            {"source": "final-read", "value": 3, "epoch": None, "index": fr, "time": T(fr), "process": str(P + 9)}],
            "replicas": {n: at1 for n in ("n1", "n2", "n3")}}],
        "realtime-order": [{"partition": p, "offset": 1, "value": 3, "epoch": 2, "index": s3, "time": T(s3),
                            "process": str(P + 2), "invoke_index": s3 - 1, "invoke_time": T(s3 - 1),
                            "previous": {"index": s2, "time": T(s2), "process": str(P + 1), "value": 2,
                                         "offset": 1, "epoch": 1}}]}}


def failed_present(b: RunBuilder, p: int) -> dict:
    """A failed send whose value is in the final log, and a poll that read it (aborted read)."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)
    f = b.send(P + 1, p, 2, outcome="fail", error="NOT_ENOUGH_REPLICAS")
    r = b.poll(P + 2, p, 0, [(0, 1), (1, 2)], hw=2)
    b.final(p, [1, 2], process=P + 9)
    return {"counts": {"failed-write-present": 1, "aborted-read": 1}, "examples": {
        "failed-write-present": [{"partition": p, "value": 2, "index": f, "time": T(f), "process": str(P + 1),
                                  "invoke_index": f - 1, "error": "NOT_ENOUGH_REPLICAS", "final_offsets": [1],
                                  "replicas": _holds(n1=1, n2=1, n3=1)}],
        "aborted-read": [{"partition": p, "value": 2, "offset": 1, "index": r, "time": T(r), "process": str(P + 2),
                          "reads": 1, "send": {"type": "fail", "index": f, "offset": None},
                          "error": "NOT_ENOUGH_REPLICAS", "replicas": _holds(n1=1, n2=1, n3=1)}]}}


def unrecovered(b: RunBuilder, p: int) -> dict:
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)
    b.send(P + 1, p, 2, offset=1)
    b.final(p, [1], recovered=False, process=P + 9)
    return {"counts": {}, "examples": {}, "unseen": 2, "reason": "not recovered", "unseen_values": [1, 2]}


def final_gap(b: RunBuilder, p: int) -> dict:
    """final-state says recovered, but the final reads miss offset 1: the partition is unseen, not lost."""
    P = 100 * p
    for k in range(3):
        b.send(P + 1, p, k, offset=k)
    b.poll(P + 9, p, 0, [(0, 0), (2, 2)], hw=3, f="final-read")
    b.final(p, [0, 1, 2], process=P + 9, read=False)
    return {"counts": {}, "examples": {}, "unseen": 3, "reason": "final reads do not cover [0, hw)",
            "unseen_values": [0, 1, 2]}


def divergence_committed(b: RunBuilder, p: int) -> dict:
    _n3_diverges(b, p, [(0, 1), (7, 2), (2, 1)], hw=3)
    rec = lambda v, e: {"record": {"value": v, "epoch": e, "crc_ok": True}, "hw": 3, "leo": 3}  # noqa: E731
    return {"counts": {"divergence": 1}, "divergence": {"committed": 1, "residual": 0}, "examples": {"divergence": [
        {"partition": p, "offset": 1, "committed": True,
         "replicas": {"n1": rec(1, 1), "n2": rec(1, 1), "n3": rec(7, 2)}}]}}


def divergence_residual(b: RunBuilder, p: int) -> dict:
    """n3 disagrees at offset 2, beyond its own HW: residual divergence after the final heal."""
    _n3_diverges(b, p, [(0, 1), (1, 1), (8, 1)], hw=2)
    return {"counts": {"divergence": 1}, "divergence": {"committed": 0, "residual": 1}, "examples": {"divergence": [
        {"partition": p, "offset": 2, "committed": False,
         "replicas": {"n1": {"record": {"value": 2, "epoch": 1, "crc_ok": True}, "hw": 3, "leo": 3},
                      "n2": {"record": {"value": 2, "epoch": 1, "crc_ok": True}, "hw": 3, "leo": 3},
                      "n3": {"record": {"value": 8, "epoch": 1, "crc_ok": True}, "hw": 2, "leo": 3}}}]}}


def read_inconsistent(b: RunBuilder, p: int) -> dict:
    """Two consumers read different values at offset 0; the second one's is not in the final log."""
    P = 100 * p
    s = b.send(P + 1, p, 1, offset=0)
    i = b.send(P + 1, p, 9, outcome="info")
    r1 = b.poll(P + 2, p, 0, [(0, 1)], hw=1)
    r2 = b.poll(P + 3, p, 0, [(0, 9)], hw=1)
    b.final(p, [1], process=P + 9)
    fr = b.ops[-2]["index"]
    at0 = {"value": 1, "epoch": 1, "crc_ok": True}
    return {"counts": {"inconsistent-offset": 1, "dirty-read": 1}, "examples": {
        "inconsistent-offset": [{"partition": p, "offset": 0, "values": [1, 9], "epochs": [1], "index": s,
                                 "observations": [
            {"source": "send", "value": 1, "epoch": 1, "index": s, "time": T(s), "process": str(P + 1)},
            {"source": "poll", "value": 1, "epoch": None, "index": r1, "time": T(r1), "process": str(P + 2)},
            {"source": "poll", "value": 9, "epoch": None, "index": r2, "time": T(r2), "process": str(P + 3)},
            {"source": "final-read", "value": 1, "epoch": None, "index": fr, "time": T(fr), "process": str(P + 9)}],
            "replicas": {n: at0 for n in ("n1", "n2", "n3")}}],
        "dirty-read": [{"partition": p, "value": 9, "offset": 0, "index": r2, "time": T(r2), "process": str(P + 3),
                        "reads": 1, "send": {"type": "info", "index": i, "offset": None},
                        "replicas": _holds()}]}}


def read_wrong_epoch(b: RunBuilder, p: int) -> dict:
    """A consumer reads the right value at offset 1 but stamped with the leader's current epoch (3), not
    the epoch it was appended in (1): the record it returned is not the log's."""
    P = 100 * p
    s0 = b.send(P + 1, p, 1, offset=0)
    s1 = b.send(P + 1, p, 2, offset=1)
    b.poll(P + 2, p, 0, [(0, 1, 1)], hw=2, epoch=3)
    r = b.poll(P + 2, p, 1, [(1, 2, 3)], hw=2, epoch=3)
    b.final(p, [1, 2], process=P + 9, record_epochs=True)
    fr = b.ops[-2]["index"]
    at1 = {"value": 2, "epoch": 1, "crc_ok": True}
    del s0
    return {"counts": {"inconsistent-offset": 1}, "examples": {
        "inconsistent-offset": [{"partition": p, "offset": 1, "values": [2], "epochs": [1, 3], "index": s1,
                                 "observations": [
            {"source": "send", "value": 2, "epoch": 1, "index": s1, "time": T(s1), "process": str(P + 1)},
            {"source": "poll", "value": 2, "epoch": 3, "index": r, "time": T(r), "process": str(P + 2)},
            {"source": "final-read", "value": 2, "epoch": 1, "index": fr, "time": T(fr), "process": str(P + 9)}],
            "replicas": {n: at1 for n in ("n1", "n2", "n3")}}]}}


def read_wrong_epoch_kafka_acks(b: RunBuilder, p: int) -> dict:
    """As read_wrong_epoch, with acknowledgements that carry no epoch (a Kafka producer's, -1): the polls'
    epochs are still compared with the final log's."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0, epoch=-1)
    s1 = b.send(P + 1, p, 2, offset=1, epoch=-1)
    r = b.poll(P + 2, p, 0, [(0, 1, 1), (1, 2, 4)], hw=2, epoch=4)
    b.final(p, [1, 2], process=P + 9, record_epochs=True)
    fr = b.ops[-2]["index"]
    at1 = {"value": 2, "epoch": 1, "crc_ok": True}
    return {"counts": {"inconsistent-offset": 1}, "examples": {
        "inconsistent-offset": [{"partition": p, "offset": 1, "values": [2], "epochs": [1, 4], "index": s1,
                                 "observations": [
            {"source": "send", "value": 2, "epoch": None, "index": s1, "time": T(s1), "process": str(P + 1)},
            {"source": "poll", "value": 2, "epoch": 4, "index": r, "time": T(r), "process": str(P + 2)},
            {"source": "final-read", "value": 2, "epoch": 1, "index": fr, "time": T(fr), "process": str(P + 9)}],
            "replicas": {n: at1 for n in ("n1", "n2", "n3")}}]}}


def epochs_agree(b: RunBuilder, p: int) -> dict:
    """Clean: every read carries the epoch its record was appended in, across a leader change (values
    1, 2 in epoch 1, 3 in epoch 2), read before and after it."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)
    b.send(P + 1, p, 2, offset=1)
    b.send(P + 1, p, 3, offset=2, epoch=2)
    b.assign(P + 2, p, 0)
    b.poll(P + 2, p, 0, [(0, 1, 1), (1, 2, 1)], hw=2, epoch=1)
    b.poll(P + 2, p, 2, [(2, 3, 2)], hw=3, epoch=2)
    b.assign(P + 3, p, 0)
    b.poll(P + 3, p, 0, [(0, 1, 1), (1, 2, 1), (2, 3, 2)], hw=3, epoch=2)
    log = [(1, 1), (2, 1), (3, 2)]
    b.final(p, [1, 2, 3], epoch=2, process=P + 9, record_epochs=True,
            replicas={n: _rep(log) for n in ("n1", "n2", "n3")})
    return {"counts": {}, "examples": {}}


def epochs_unknown(b: RunBuilder, p: int) -> dict:
    """Not a finding: a partition where some poll record carries no epoch (-1, or an old two-element
    record) has no poll epochs compared, so a poll stamped with another epoch passes (docs/formats.md)."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)
    b.send(P + 1, p, 2, offset=1)
    b.poll(P + 2, p, 0, [(0, 1, -1), (1, 2, 5)], hw=2, epoch=5)
    b.poll(P + 3, p, 0, [(0, 1), (1, 2, 1)], hw=2, epoch=1)
    b.final(p, [1, 2], process=P + 9, record_epochs=True)
    return {"counts": {}, "examples": {}}


def dirty_read(b: RunBuilder, p: int) -> dict:
    """A value read twice by consumers, then truncated (info send, absent from the final log)."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)
    i = b.send(P + 1, p, 2, outcome="info")
    r1 = b.poll(P + 2, p, 0, [(0, 1), (1, 2)], hw=2)
    b.poll(P + 3, p, 1, [(1, 2)], hw=2)
    s3 = b.send(P + 4, p, 3, offset=1, epoch=2)
    b.final(p, [1, 3], epoch=2, process=P + 9, replicas={n: _rep([(1, 1), (3, 2)]) for n in ("n1", "n2", "n3")})
    return {"counts": {"dirty-read": 2, "inconsistent-offset": 1}, "examples": {
        "dirty-read": [{"partition": p, "value": 2, "offset": 1, "index": r1, "time": T(r1), "process": str(P + 2),
                        "reads": 2, "send": {"type": "info", "index": i, "offset": None}, "replicas": _holds()}],
        "inconsistent-offset": None}}  # None: count checked, example not spelled out here (see read_inconsistent)


def duplicate(b: RunBuilder, p: int) -> dict:
    P = 100 * p
    s1 = b.send(P + 1, p, 1, offset=0)
    b.send(P + 1, p, 2, offset=1)
    b.final(p, [1, 2, 1], process=P + 9)
    return {"counts": {"duplicate": 1}, "examples": {"duplicate": [
        {"partition": p, "value": 1, "offsets": [0, 2], "count": 2, "index": s1,
         "send": {"type": "ok", "index": s1, "offset": 0}, "replicas": _holds(n1=0, n2=0, n3=0)}]}}


def nonmonotonic_send(b: RunBuilder, p: int) -> dict:
    """One producer's second ack is below its first; its sends never overlap, so it is a realtime-order too."""
    P = 100 * p
    a = b.send(P + 1, p, 1, offset=1)
    c = b.send(P + 1, p, 2, offset=0)
    b.send(P + 1, p, 3, offset=2)
    b.final(p, [2, 1, 3], process=P + 9)
    return {"counts": {"nonmonotonic-send": 1, "realtime-order": 1}, "examples": {"nonmonotonic-send": [
        {"partition": p, "process": str(P + 1), "index": c,
         "earlier": {"index": a, "time": T(a), "value": 1, "offset": 1, "epoch": 1},
         "later": {"index": c, "time": T(c), "value": 2, "offset": 0, "epoch": 1}}],
        "realtime-order": [{"partition": p, "offset": 0, "value": 2, "epoch": 1, "index": c, "time": T(c),
                            "process": str(P + 1), "invoke_index": c - 1, "invoke_time": T(c - 1),
                            "previous": {"index": a, "time": T(a), "process": str(P + 1), "value": 1,
                                         "offset": 1, "epoch": 1}}]}}


def realtime_order(b: RunBuilder, p: int) -> dict:
    """Two producers, one after the other: 2 is acknowledged at offset 2, then 3 is invoked by another
    producer and acknowledged at offset 1. The final log holds them in that order, so nothing is lost or
    misread; only the real-time order is broken. `previous` is the earlier ack with the highest offset
    (2 at 2, not 1 at 0)."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)
    a = b.send(P + 1, p, 2, offset=2)
    c = b.send(P + 2, p, 3, offset=1, epoch=2)
    b.send(P + 2, p, 4, offset=3, epoch=2)
    b.final(p, [1, 3, 2, 4], epoch=2, process=P + 9)
    return {"counts": {"realtime-order": 1}, "examples": {"realtime-order": [
        {"partition": p, "offset": 1, "value": 3, "epoch": 2, "index": c, "time": T(c), "process": str(P + 2),
         "invoke_index": c - 1, "invoke_time": T(c - 1),
         "previous": {"index": a, "time": T(a), "process": str(P + 1), "value": 2, "offset": 2, "epoch": 1}}]}}


def realtime_overlap(b: RunBuilder, p: int) -> dict:
    """Overlapping sends are never compared: 2 is invoked, 3 is acknowledged at offset 2 meanwhile, then 2
    at offset 1. Sends that follow each other's acknowledgements get increasing offsets: nothing."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)
    b.op(P + 2, "invoke", "send", {"partition": p, "value": 2})                       # 2 invoked ...
    b.send(P + 3, p, 3, offset=2)                                                     # ... 3 acknowledged ...
    b.op(P + 2, "ok", "send", {"partition": p, "value": 2, "offset": 1, "epoch": 1})  # ... 2 below it: concurrent
    b.send(P + 4, p, 4, offset=3)
    b.final(p, [1, 2, 3, 4], process=P + 9)
    return {"counts": {}, "examples": {}}


def poll_skip(b: RunBuilder, p: int) -> dict:
    """A poll that skips offset 2; a reassignment that legitimately jumps; an assign followed by a gap."""
    P = 100 * p
    for k in range(6):
        b.send(P + 1, p, k, offset=k)
    b.assign(P + 2, p, 0)
    r1 = b.poll(P + 2, p, 0, [(0, 0), (1, 1)], hw=6)
    r2 = b.poll(P + 2, p, 2, [(3, 3), (4, 4)], hw=6)
    b.assign(P + 3, p, 0)
    b.poll(P + 3, p, 0, [(0, 0), (1, 1)], hw=6)
    b.assign(P + 3, p, 4)                               # reassignment: the jump is fine
    b.poll(P + 3, p, 4, [(4, 4), (5, 5)], hw=6)
    a = b.assign(P + 4, p, 1)
    r3 = b.poll(P + 4, p, 1, [(3, 3)], hw=6)
    b.final(p, list(range(6)), process=P + 9)
    return {"counts": {"poll-skip": 2}, "examples": {"poll-skip": [
        {"partition": p, "process": str(P + 2), "index": r2, "time": T(r2), "offset": 3, "value": 3, "gap": 1,
         "previous": {"kind": "read", "index": r1, "time": T(r1), "offset": 1, "value": 1},
         "skipped": [{"offset": 2, "value": 2}]},
        {"partition": p, "process": str(P + 4), "index": r3, "time": T(r3), "offset": 3, "value": 3, "gap": 2,
         "previous": {"kind": "assign", "index": a, "time": T(a), "offset": 1, "value": None},
         "skipped": [{"offset": 1, "value": 1}, {"offset": 2, "value": 2}]}]}}


def nonmonotonic_poll(b: RunBuilder, p: int) -> dict:
    P = 100 * p
    for k in range(3):
        b.send(P + 1, p, k, offset=k)
    r1 = b.poll(P + 2, p, 0, [(0, 0), (1, 1)], hw=3)
    r2 = b.poll(P + 2, p, 1, [(1, 1), (2, 2)], hw=3)
    b.final(p, [0, 1, 2], process=P + 9)
    return {"counts": {"nonmonotonic-poll": 1}, "examples": {"nonmonotonic-poll": [
        {"partition": p, "process": str(P + 2), "index": r2, "time": T(r2), "offset": 1, "value": 1,
         "previous": {"kind": "read", "index": r1, "time": T(r1), "offset": 1, "value": 1}}]}}


def hw_regression(b: RunBuilder, p: int) -> dict:
    """Same-epoch regression after a completed observation; overlapping polls are not compared."""
    P = 100 * p
    for k in range(10):
        b.send(P + 1, p, k, offset=k)
    a = b.poll(P + 2, p, 0, [], hw=5)
    reg = b.poll(P + 3, p, 0, [], hw=3)                  # invoked after a completed: regression
    b.op(P + 4, "invoke", "poll", {"partition": p, "offset": 0})     # C invoked ...
    d = b.poll(P + 5, p, 0, [], hw=9)                   # ... D runs and completes meanwhile ...
    b.op(P + 4, "ok", "poll", {"partition": p, "offset": 0, "records": [], "hw": 6, "epoch": 1})  # C: concurrent, fine
    b.final(p, list(range(10)), process=P + 9)
    return {"counts": {"hw-regression": 1}, "examples": {"hw-regression": [
        {"partition": p, "epoch": 1, "hw": 3, "index": reg, "time": T(reg), "process": str(P + 3),
         "invoke_index": reg - 1, "f": "poll",
         "previous": {"hw": 5, "index": a, "epoch": 1, "time": T(a), "process": str(P + 2)}}]}}


def lost_prefix(b: RunBuilder, p: int) -> dict:
    """v1@0 and v2@1 acked, then lost: the final log holds two never-acknowledged (info) values there."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)
    b.send(P + 1, p, 2, offset=1)
    b.send(P + 2, p, 91, outcome="info")
    b.send(P + 2, p, 92, outcome="info")
    b.send(P + 3, p, 3, offset=2, epoch=2)
    b.final(p, [91, 92, 3], epoch=2, process=P + 9)
    return {"counts": {"lost-write": 2, "inconsistent-offset": 2}, "loss_shape": {"prefix": {"writes": 2, "runs": 1}},
            "examples": {"lost-write": None, "inconsistent-offset": None}}


def lost_suffix(b: RunBuilder, p: int) -> dict:
    """v3@2 and v4@3 acknowledged beyond the final HW (2)."""
    P = 100 * p
    for k in range(4):
        b.send(P + 1, p, k + 1, offset=k)
    b.final(p, [1, 2], process=P + 9)
    return {"counts": {"lost-write": 2}, "loss_shape": {"suffix": {"writes": 2, "runs": 1}},
            "examples": {"lost-write": None}}


def lost_mix(b: RunBuilder, p: int) -> dict:
    """Acknowledged sequence (offset, value): (0,1) lost | (1,2) | (2,3) (3,4) lost | (4,5) | (5,6) lost,
    (5,7) its replacement (a later index at the same offset) | (6,8) | (7,9) (8,10) (9,11) lost beyond
    the HW: prefix 1 in 1 run, middle 3 in 2 runs, suffix 3 in 1 run."""
    P = 100 * p
    for k in range(5):
        b.send(P + 1, p, k + 1, offset=k)              # 1..5 at 0..4
    b.send(P + 1, p, 6, offset=5)
    for v in (91, 92, 93):
        b.send(P + 2, p, v, outcome="info")
    b.send(P + 3, p, 7, offset=5, epoch=2)
    for k in range(6, 10):
        b.send(P + 3, p, k + 2, offset=k, epoch=2)     # 8..11 at 6..9
    b.final(p, [91, 2, 92, 93, 5, 7, 8], epoch=2, process=P + 9)
    return {"counts": {"lost-write": 7, "inconsistent-offset": 4, "realtime-order": 1},   # 7 at 5 after 6 at 5
            "loss_shape": {"prefix": {"writes": 1, "runs": 1}, "middle": {"writes": 3, "runs": 2},
                           "suffix": {"writes": 3, "runs": 1}},
            "examples": {"lost-write": None, "inconsistent-offset": None, "realtime-order": None}}


def lost_all(b: RunBuilder, p: int) -> dict:
    """Everything acknowledged is lost (the final log is empty): one run, counted as `all` only."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0)
    b.send(P + 1, p, 2, offset=1)
    b.final(p, [], process=P + 9)
    return {"counts": {"lost-write": 2}, "loss_shape": {"all": {"writes": 2, "runs": 1}},
            "examples": {"lost-write": None}}


def key_reorder(b: RunBuilder, p: int) -> dict:
    """Keyed sends (the keyed workload): key 7's value 2 is acknowledged at offset 3; then key 7's value 3,
    of unknown outcome, lands at offset 2, below it (a key-reorder), and key 8's value 4, also invoked after
    that ack, at offset 1 (another key: nothing). The acknowledgements themselves are in order, so
    realtime-order has nothing to say; nothing is lost."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=0, key=7)
    a = b.send(P + 1, p, 2, offset=3, key=7)
    c = b.send(P + 1, p, 3, outcome="info", key=7)
    b.send(P + 2, p, 4, outcome="info", key=8)
    b.send(P + 3, p, 5, offset=4, key=7)
    b.final(p, [1, 4, 3, 2, 5], process=P + 9)
    return {"counts": {"key-reorder": 1}, "examples": {"key-reorder": [
        {"partition": p, "key": 7, "value": 3, "offset": 2, "type": "info", "index": c, "time": T(c),
         "invoke_index": c - 1, "previous": {"value": 2, "offset": 3, "index": a, "time": T(a)}}]}}


def key_reorder_in_flight(b: RunBuilder, p: int) -> dict:
    """A keyed send still in flight when the history ends (ingest closes it as `info`, keeping its key)
    that landed below an acknowledged record of its key: a key-reorder, like a completed one. Its time is
    the history's end, known only once every scenario is written: the example leaves it out."""
    P = 100 * p
    b.send(P + 1, p, 1, offset=1, key=4)
    b.op(P + 2, "invoke", "send", {"partition": p, "key": 4, "value": 2})
    b.final(p, [2, 1], process=P + 9)
    return {"counts": {"key-reorder": 1}, "examples": {"key-reorder": None}}


def key_order_clean(b: RunBuilder, p: int) -> dict:
    """Keyed sends whose order a key's readers may see either way: key 3's value 1 (unknown outcome, then
    present) was invoked before value 2's acknowledgement, so it may land after it; and key 3's value 3 is
    invoked while value 4 of the same key is in flight (overlapping), then lands below it."""
    P = 100 * p
    b.send(P + 1, p, 1, outcome="info", key=3)
    b.send(P + 2, p, 2, offset=0, key=3)
    b.op(P + 3, "invoke", "send", {"partition": p, "key": 3, "value": 4})
    b.op(P + 4, "invoke", "send", {"partition": p, "key": 3, "value": 3})
    b.op(P + 3, "ok", "send", {"partition": p, "key": 3, "value": 4, "offset": 3, "epoch": 1})
    b.op(P + 4, "info", "send", {"partition": p, "key": 3, "value": 3}, error="timeout")
    b.final(p, [2, 1, 3, 4], process=P + 9)
    return {"counts": {}, "examples": {}}


# --- consumer groups (the group workload: tests/checkers/group_ops.py writes its operations) -------------
# Each scenario's group is its own ("g<p>"), so scenarios can share a run directory.

def _group_sends(b: RunBuilder, p: int, n: int) -> list[int]:
    """Values 10, 11, ... acknowledged at offsets 0..n-1 of partition p; the final log's values."""
    for k in range(n):
        b.send(100 * p + 1, p, 10 + k, offset=k)
    return [10 + k for k in range(n)]


def _recs(lo: int, hi: int) -> list[tuple[int, int]]:
    return [(o, 10 + o) for o in range(lo, hi)]


def group_clean(b: RunBuilder, p: int) -> dict:
    """A group through three rebalances that breaks nothing: member a reads 0..4 and commits 3 (sync),
    then 5 (async) still in flight when member b of generation 2 is assigned the partition with committed
    5 (the async commit was applied, its acknowledgement came later: an in-flight commit explains the
    resume point, E being 3); a's zombie commit of generation 1 fails ILLEGAL_GENERATION; b reads 5, its
    commit fails REBALANCE_IN_PROGRESS, and member c of generation 3 resumes at 5 and reads it again (a
    group-reread, counted, allowed) and auto-commits 6. Two assignments of generation -1 (unknown) share
    the partition (never compared), and a second group resumes from the log start, where nothing was
    committed. The final committed offsets: 6, and none."""
    P, G = 100 * p, f"g{p}"
    log = _group_sends(b, p, 6)
    a, m_b, m_c = P + 2, P + 3, P + 4
    g.group_assign(b, a, G, "a", 1, {p: -1})
    b.assign(a, p, 0)
    g.group_poll(b, a, G, 1, p, 0, _recs(0, 3), hw=6)
    g.commit(b, a, G, "a", 1, {p: 3})
    g.group_poll(b, a, G, 1, p, 3, _recs(3, 5), hw=6)
    g.commit(b, a, G, "a", 1, {p: 5}, outcome=None, mode="async")
    g.group_revoke(b, a, G, "a", 1, [p])
    g.group_assign(b, m_b, G, "b", 2, {p: 5})
    g.complete(b, a, "commit", g.commit_value(G, "a", 1, {p: 5}, "async"))
    g.commit(b, a, G, "a", 1, {p: 5}, outcome="fail", error="ILLEGAL_GENERATION")
    b.assign(m_b, p, 5)
    first = g.group_poll(b, m_b, G, 2, p, 5, _recs(5, 6), hw=6)
    g.commit(b, m_b, G, "b", 2, {p: 6}, outcome="fail", error="REBALANCE_IN_PROGRESS")
    g.group_revoke(b, m_b, G, "b", 2, [p])
    g.group_assign(b, m_c, G, "c", 3, {p: 5})
    b.assign(m_c, p, 5)
    again = g.group_poll(b, m_c, G, 3, p, 5, _recs(5, 6), hw=6)
    g.commit(b, m_c, G, "c", 3, {p: 6}, mode="auto")
    g.group_assign(b, P + 6, G, "e", -1, {p: 6})
    g.group_assign(b, P + 7, G, "f", -1, {p: 6})
    H = f"h{p}"
    g.group_assign(b, P + 5, H, "h1", 1, {p: -1})
    b.assign(P + 5, p, 0)
    g.group_poll(b, P + 5, H, 1, p, 0, _recs(0, 6), hw=6)
    g.committed(b, P + 8, G, {p: 6})
    g.committed(b, P + 8, H, {p: -1})
    b.final(p, log, process=P + 9)
    return {"counts": {"group-reread": 1}, "examples": {"group-reread": [
        {"group": G, "partition": p, "value": 15, "offset": 5, "reads": 2, "index": again, "time": T(again),
         "process": str(m_c), "first": {"index": first, "time": T(first), "process": str(m_b), "offset": 5}}]}}


def group_auto_commit_late(b: RunBuilder, p: int) -> dict:
    """Member a auto-commits 2 on its way out of the group, but the client reports the commit (invoke and
    completion written together) only after member b, given committed 2, was assigned the partition: b
    resuming at 2 is no mismatch, though the acknowledged commits before b's assign say 1. Member b's own
    auto-commit of its start would not have explained it (the next member resumes at 3, committed 3)."""
    P, G = 100 * p, f"g{p}"
    log = _group_sends(b, p, 4)
    g.group_assign(b, P + 2, G, "a", 1, {p: -1})
    b.assign(P + 2, p, 0)
    g.group_poll(b, P + 2, G, 1, p, 0, _recs(0, 2), hw=4)
    g.commit(b, P + 2, G, "a", 1, {p: 1}, mode="auto")
    g.group_revoke(b, P + 2, G, "a", 1, [p])
    g.group_assign(b, P + 3, G, "b", 2, {p: 2})
    g.commit(b, P + 2, G, "a", 1, {p: 2}, mode="auto")
    b.assign(P + 3, p, 2)
    g.group_poll(b, P + 3, G, 2, p, 2, _recs(2, 4), hw=4)
    g.commit(b, P + 3, G, "b", 2, {p: 4})
    g.committed(b, P + 8, G, {p: 4})
    b.final(p, log, process=P + 9)
    return {"counts": {}, "examples": {}}


def committed_regression(b: RunBuilder, p: int) -> dict:
    """A commit of 3 is acknowledged; the final committed read, invoked after it, answers 1."""
    P, G = 100 * p, f"g{p}"
    log = _group_sends(b, p, 3)
    g.group_assign(b, P + 2, G, "a", 1, {p: -1})
    b.assign(P + 2, p, 0)
    g.group_poll(b, P + 2, G, 1, p, 0, _recs(0, 3), hw=3)
    ack = g.commit(b, P + 2, G, "a", 1, {p: 3})
    read = g.committed(b, P + 8, G, {p: 1})
    b.final(p, log, process=P + 9)
    return {"counts": {"committed-regression": 1}, "examples": {"committed-regression": [
        {"group": G, "partition": p, "offset": 1, "f": "committed", "index": read, "time": T(read),
         "invoke_index": read - 1, "process": str(P + 8),
         "previous": {"offset": 3, "index": ack, "time": T(ack), "process": str(P + 2), "member": "a",
                      "generation": 1}}]}}


def group_resume_mismatch(b: RunBuilder, p: int) -> dict:
    """Member a reads 0, 1 and commits 2 (acknowledged); member b of the next generation is assigned the
    partition with committed 2, yet its first records start at 3 (no commit in flight)."""
    P, G = 100 * p, f"g{p}"
    _group_sends(b, p, 4)
    g.group_assign(b, P + 2, G, "a", 1, {p: -1})
    b.assign(P + 2, p, 0)
    g.group_poll(b, P + 2, G, 1, p, 0, _recs(0, 2), hw=4)
    g.commit(b, P + 2, G, "a", 1, {p: 2})
    g.group_revoke(b, P + 2, G, "a", 1, [p])
    assigned = g.group_assign(b, P + 3, G, "b", 2, {p: 2})
    b.assign(P + 3, p, 3)
    poll = g.group_poll(b, P + 3, G, 2, p, 3, _recs(3, 4), hw=4)
    b.final(p, [10, 11, 12, 13], process=P + 9)
    return {"counts": {"group-resume-mismatch": 1}, "examples": {"group-resume-mismatch": [
        {"group": G, "partition": p, "member": "b", "generation": 2, "offset": 3, "expected": 2, "index": poll,
         "time": T(poll), "process": str(P + 3),
         "assign": {"index": assigned, "time": T(assigned), "invoke_index": assigned - 1, "committed": 2}}]}}


def lost_by_group(b: RunBuilder, p: int) -> dict:
    """A member reads 0, 1 and commits 3: the final committed offset 3 covers offset 2, which no member
    of the group ever polled."""
    P, G = 100 * p, f"g{p}"
    log = _group_sends(b, p, 4)
    g.group_assign(b, P + 2, G, "a", 1, {p: -1})
    b.assign(P + 2, p, 0)
    g.group_poll(b, P + 2, G, 1, p, 0, _recs(0, 2), hw=4)
    g.commit(b, P + 2, G, "a", 1, {p: 3})
    read = g.committed(b, P + 8, G, {p: 3})
    b.final(p, log, process=P + 9)
    return {"counts": {"lost-by-group": 1}, "examples": {"lost-by-group": [
        {"group": G, "partition": p, "offset": 2, "value": 12, "committed": 3, "index": read, "time": T(read)}]}}


def commit_beyond_log(b: RunBuilder, p: int) -> dict:
    """A member reads the whole log (0..2) and commits 5, acknowledged; the final committed offset is 5
    too: both above the final HW 3."""
    P, G = 100 * p, f"g{p}"
    log = _group_sends(b, p, 3)
    g.group_assign(b, P + 2, G, "a", 1, {p: -1})
    b.assign(P + 2, p, 0)
    g.group_poll(b, P + 2, G, 1, p, 0, _recs(0, 3), hw=3)
    ack = g.commit(b, P + 2, G, "a", 1, {p: 5})
    read = g.committed(b, P + 8, G, {p: 5})
    b.final(p, log, process=P + 9)
    return {"counts": {"commit-beyond-log": 2}, "examples": {"commit-beyond-log": [
        {"group": G, "partition": p, "offset": 5, "hw": 3, "f": "commit", "index": ack, "time": T(ack),
         "process": str(P + 2), "member": "a", "generation": 1},
        {"group": G, "partition": p, "offset": 5, "hw": 3, "f": "committed", "index": read, "time": T(read),
         "process": str(P + 8), "member": None, "generation": None}]}}


def assignment_overlap(b: RunBuilder, p: int) -> dict:
    """Members a and b of generation 4 are both assigned the partition."""
    P, G = 100 * p, f"g{p}"
    log = _group_sends(b, p, 1)
    first = g.group_assign(b, P + 2, G, "a", 4, {p: -1})
    second = g.group_assign(b, P + 3, G, "b", 4, {p: -1})
    b.final(p, log, process=P + 9)
    return {"counts": {"assignment-overlap": 1}, "examples": {"assignment-overlap": [
        {"group": G, "generation": 4, "partition": p, "members": ["a", "b"], "member": "b", "index": second,
         "time": T(second), "process": str(P + 3),
         "first": {"member": "a", "index": first, "time": T(first), "process": str(P + 2)}}]}}


def group_reread(b: RunBuilder, p: int) -> dict:
    """Member a reads 0, 1 and commits nothing; after a rebalance member b starts from the log start (none
    committed) and reads both again: two re-reads, allowed."""
    P, G = 100 * p, f"g{p}"
    log = _group_sends(b, p, 2)
    g.group_assign(b, P + 2, G, "a", 1, {p: -1})
    b.assign(P + 2, p, 0)
    first = g.group_poll(b, P + 2, G, 1, p, 0, _recs(0, 2), hw=2)
    g.group_revoke(b, P + 2, G, "a", 1, [p])
    g.group_assign(b, P + 3, G, "b", 2, {p: -1})
    b.assign(P + 3, p, 0)
    again = g.group_poll(b, P + 3, G, 2, p, 0, _recs(0, 2), hw=2)
    b.final(p, log, process=P + 9)
    return {"counts": {"group-reread": 2}, "examples": {"group-reread": [
        {"group": G, "partition": p, "value": 10 + o, "offset": o, "reads": 2, "index": again, "time": T(again),
         "process": str(P + 3), "first": {"index": first, "time": T(first), "process": str(P + 2), "offset": o}}
        for o in (0, 1)]}}


GROUP_SCENARIOS = [group_clean, group_auto_commit_late, committed_regression, group_resume_mismatch, lost_by_group, commit_beyond_log,
                   assignment_overlap, group_reread]

SCENARIOS = [clean, tricky_clean, lost_write, failed_present, unrecovered, final_gap, divergence_committed,
             divergence_residual, read_inconsistent, read_wrong_epoch, read_wrong_epoch_kafka_acks, epochs_agree,
             epochs_unknown, dirty_read, duplicate,
             nonmonotonic_send, poll_skip,
             nonmonotonic_poll, hw_regression, lost_prefix, lost_suffix, lost_mix, lost_all, realtime_order,
             realtime_overlap, key_reorder, key_reorder_in_flight, key_order_clean, *GROUP_SCENARIOS]


# --- protocol rules (broker/rules): hand-written event log lines that break exactly one rule ------------
# The builder's clock gives each line its `ts` (tests/simulated_runs.py, `RunBuilder.event`); no scenario
# writes a broker's node-wide `start`, which the rules would hand to every partition of the run.

def _line(b: RunBuilder, node: str, event: str, **fields) -> dict:
    """Write one event line on partition `fields["partition"]`; return it as a finding's evidence row."""
    ts = b.event(node, event, **fields)
    return {"ts": ts, "node": node, "event": event, **fields, "time": ts - b.start_wall_ns}


def _acked(b: RunBuilder, p: int) -> None:
    """The partition's history: one write acknowledged and finally read (no black-box finding)."""
    b.send(100 * p + 1, p, 1, offset=0)
    b.final(p, [1], process=100 * p + 9)


def _same_clock(b: RunBuilder) -> None:
    """The clock rules (broker/rules CLOCK_RULES) are promised only when the run says every log read one
    clock (a local backend), as the builder's lines do."""
    b.backend = "local"


def _found(kind: str, row: dict, epoch, detail: str, *evidence: dict) -> dict:
    """The example a broken rule gives: at `row` (the last evidence row unless given)."""
    return {"counts": {kind: 1}, "examples": {kind: [
        {"partition": row["partition"], "node": row["node"], "time": row["time"], "ts": row["ts"], "epoch": epoch,
         "detail": detail, "promised": True, "evidence": list(evidence or (row,))}]}}


def protocol_clean(b: RunBuilder, p: int) -> dict:
    """An election from the ISR, acks=all acknowledged after the HW passed them, a follower truncating to
    its HW, and a poll below the HW: every rule kept."""
    c = dict(topic="hw", partition=p)
    _line(b, "c0", "leader-change", **c, leader=1, epoch=0, isr=[1, 2, 3], version=0)
    _line(b, "n1", "role", partition=p, role="leader", epoch=0)
    for n in ("n2", "n3"):
        _line(b, n, "role", partition=p, role="follower", epoch=0)
    _line(b, "n1", "hw-change", partition=p, old=0, new=2, leo=2)
    _line(b, "n1", "ack", partition=p, base=0, last=1, epoch=0, acks=-1, hw=2, isr=[1, 2, 3], min_isr=2)
    _line(b, "n2", "hw-change", partition=p, old=0, new=2, leo=2)
    _line(b, "c0", "isr-change", **c, isr=[1, 2], version=1)
    _line(b, "c0", "isr-change", **c, isr=[2], version=2)
    _line(b, "c0", "leader-change", **c, leader=2, epoch=1, isr=[2], version=2)   # chosen from [1, 2]
    _line(b, "n2", "role", partition=p, role="leader", epoch=1)
    _line(b, "n1", "role", partition=p, role="follower", epoch=1)
    _line(b, "n1", "truncate", **c, **{"from": 2, "to": 2, "why": "leader-epoch"})
    P = 100 * p
    b.send(P + 1, p, 1, offset=0, epoch=0)
    b.send(P + 1, p, 2, offset=1, epoch=0)
    b.assign(P + 2, p, 0)
    b.poll(P + 2, p, 0, [(0, 1), (1, 2)], hw=2, epoch=1)
    b.final(p, [1, 2], process=P + 9)
    return {"counts": {}, "examples": {}}


def hw_above_leo(b: RunBuilder, p: int) -> dict:
    _acked(b, p)
    _line(b, "n1", "role", partition=p, role="leader", epoch=1)
    bad = _line(b, "n1", "hw-change", partition=p, old=3, new=5, leo=4)
    return _found("hw-above-leo", bad, 1, "n1 set its HW to 5, past its LEO 4")


def leader_hw_decrease(b: RunBuilder, p: int) -> dict:
    _acked(b, p)
    _line(b, "n1", "role", partition=p, role="leader", epoch=2)
    _line(b, "n1", "hw-change", partition=p, old=0, new=5, leo=6)
    bad = _line(b, "n1", "hw-change", partition=p, old=5, new=3, leo=6)
    return _found("leader-hw-decrease", bad, 2, "n1 leads epoch 2 and its HW went back from 5 to 3")


def follower_hw_ahead(b: RunBuilder, p: int) -> dict:
    """n2 follows to HW 3 while its leader's HW is 2."""
    _acked(b, p)
    _same_clock(b)
    _line(b, "n1", "role", partition=p, role="leader", epoch=1)
    leader = _line(b, "n1", "hw-change", partition=p, old=0, new=2, leo=3)
    _line(b, "n2", "role", partition=p, role="follower", epoch=1)
    bad = _line(b, "n2", "hw-change", partition=p, old=0, new=3, leo=3)
    return _found("follower-hw-ahead", bad, 1,
                  "n2 follows in epoch 1 and set its HW to 3; no leader had an HW above 2 by then", leader, bad)


def ack_above_hw(b: RunBuilder, p: int) -> dict:
    """acks=all answered with the HW below its last offset; the acks=1 answer after it is no finding."""
    _acked(b, p)
    _line(b, "n1", "role", partition=p, role="leader", epoch=1)
    _line(b, "n1", "hw-change", partition=p, old=0, new=2, leo=4)
    bad = _line(b, "n1", "ack", partition=p, base=2, last=3, epoch=1, acks=-1, hw=2, isr=[1, 2], min_isr=2)
    _line(b, "n1", "ack", partition=p, base=4, last=4, epoch=1, acks=1, hw=2, isr=[1], min_isr=2)
    return _found("ack-above-hw", bad, 1, "n1 acknowledged offsets up to 3 (acks=all) with its HW at 2")


def ack_below_min_isr(b: RunBuilder, p: int) -> dict:
    _acked(b, p)
    _line(b, "n1", "role", partition=p, role="leader", epoch=1)
    _line(b, "n1", "hw-change", partition=p, old=0, new=3, leo=3)
    bad = _line(b, "n1", "ack", partition=p, base=0, last=2, epoch=1, acks=-1, hw=3, isr=[1], min_isr=2)
    return _found("ack-below-min-isr", bad, 1,
                  "n1 acknowledged offset 2 (acks=all) with ISR [1], below min.insync.replicas 2")


def ack_before_flush(b: RunBuilder, p: int) -> dict:
    """With flush=always (the builder's default configuration) n1 acknowledges offsets up to 2 with its
    log flushed below 3 (fine), then up to 4 with it flushed below 4 (not)."""
    _acked(b, p)
    _line(b, "n1", "role", partition=p, role="leader", epoch=1)
    _line(b, "n1", "ack", partition=p, base=0, last=2, epoch=1, acks=1, hw=0, isr=[1, 2], min_isr=2, flushed=3)
    bad = _line(b, "n1", "ack", partition=p, base=3, last=4, epoch=1, acks=1, hw=0, isr=[1, 2], min_isr=2,
                flushed=4)
    return _found("ack-before-flush", bad, 1, "n1 acknowledged offsets up to 4 with its log flushed below 4 "
                                              "(flush=always)")


def acked_not_durable(b: RunBuilder, p: int) -> dict:
    """n1 acknowledged offsets 1..3 (acks=1), then reopened its log with LEO 2."""
    _acked(b, p)
    _line(b, "n1", "role", partition=p, role="leader", epoch=1)
    _line(b, "n1", "hw-change", partition=p, old=0, new=1, leo=4)
    ack = _line(b, "n1", "ack", partition=p, base=1, last=3, epoch=1, acks=1, hw=1, isr=[1, 2], min_isr=1)
    bad = _line(b, "n1", "recovered", topic="hw", partition=p, leo=2, hw=1, checkpoint_hw=1, epochs=[[1, 0]])
    return _found("acked-not-durable", bad, 1, "n1 reopened its log with LEO 2, below offset 3 it had acknowledged",
                  ack, bad)


def acked_not_durable_damaged(b: RunBuilder, p: int) -> dict:
    """n3 acknowledged offsets 1..3 (acks=1), a corrupt fault damaged its files and it reopened its log with
    LEO 2: the disk's loss, no finding (the other copies keep the records). Later, with no damage since, it
    acknowledged up to 5 and reopened with LEO 4: a finding."""
    _acked(b, p)
    _line(b, "n3", "role", partition=p, role="leader", epoch=1)
    _line(b, "n3", "hw-change", partition=p, old=0, new=1, leo=4)
    _line(b, "n3", "ack", partition=p, base=1, last=3, epoch=1, acks=1, hw=1, isr=[3, 1], min_isr=1)
    fid = b.fault("start", fault="corrupt", targets=("n3",))
    b.fault("stop", fid, fault="corrupt", targets=("n3",))
    _line(b, "n3", "recovered", topic="hw", partition=p, leo=2, hw=1, checkpoint_hw=1, epochs=[[1, 0]])
    _line(b, "n3", "role", partition=p, role="leader", epoch=2)
    ack = _line(b, "n3", "ack", partition=p, base=2, last=5, epoch=2, acks=1, hw=2, isr=[3, 1], min_isr=1)
    bad = _line(b, "n3", "recovered", topic="hw", partition=p, leo=4, hw=2, checkpoint_hw=2, epochs=[[1, 0], [2, 2]])
    return _found("acked-not-durable", bad, 2, "n3 reopened its log with LEO 4, below offset 5 it had acknowledged",
                  ack, bad)


def damaged_record_kept(b: RunBuilder, p: int) -> dict:
    """A storage fault damaged n2's record at offset 3 of this partition while it was down; its restart
    reopened the log with LEO 6, the damaged record kept (recovery must cut there). The damage is stamped
    on the history's clock, so the rule is judged where every process reads one clock."""
    _same_clock(b)
    _acked(b, p)
    _line(b, "n2", "role", partition=p, role="follower", epoch=1)
    fid = b.fault("start", fault="corrupt", targets=("n2",),
                  damage=[{"node": "n2", "how": "bitflip", "partition": p, "offset": 3}])
    done = b.ops[-1]
    b.fault("stop", fid, fault="corrupt", targets=("n2",))
    damaged = {"ts": b.wall(done["time"]), "node": "n2", "event": "damaged", "index": done["index"],
               "time": done["time"], "damaged_partition": p, "damaged_offset": 3, "partition": p}
    bad = _line(b, "n2", "recovered", topic="hw", partition=p, leo=6, hw=2, checkpoint_hw=2, epochs=[[1, 0]])
    return _found("damaged-record-kept", bad, 1,
                  "n2 reopened its log with LEO 6, keeping offset 3 whose record a storage fault had damaged",
                  damaged, bad)


def epoch_two_leaders(b: RunBuilder, p: int) -> dict:
    _acked(b, p)
    first = _line(b, "n1", "role", partition=p, role="leader", epoch=3)
    bad = _line(b, "n2", "role", partition=p, role="leader", epoch=3)
    return _found("epoch-two-leaders", bad, 3, "n2 and n1 both led epoch 3", first, bad)


def leader_not_elected(b: RunBuilder, p: int) -> dict:
    """The controller elected n1 for epoch 1; n2 took it (decided when the logs end)."""
    _acked(b, p)
    _line(b, "c0", "isr-change", topic="hw", partition=p, isr=[1, 2, 3], version=1)
    _line(b, "c0", "leader-change", topic="hw", partition=p, leader=1, epoch=1, isr=[1, 2, 3], version=2)
    bad = _line(b, "n2", "role", partition=p, role="leader", epoch=1)
    _line(b, "n3", "role", partition=p, role="follower", epoch=1)
    return _found("leader-not-elected", bad, 1, "n2 led epoch 1, but the controller elected n1 for that epoch")


def election_outside_isr(b: RunBuilder, p: int) -> dict:
    """The ISR was [1, 2]; the election's own isr-change (version 4) made it [3] and elected n3."""
    _acked(b, p)
    b.event("n1", "ack", partition=p, base=0, last=0, epoch=1, acks=-1, hw=1, isr=[1, 2], min_isr=2, flushed=1)
    c = dict(topic="hw", partition=p)
    _line(b, "c0", "isr-change", **c, isr=[1, 2], version=3)
    _line(b, "c0", "isr-change", **c, isr=[3], version=4)
    bad = _line(b, "c0", "leader-change", **c, leader=3, epoch=2, isr=[3], version=4)
    return _found("election-outside-isr", bad, 2, "the controller elected n3 for epoch 2 from ISR [1, 2]")


def epoch_not_increasing(b: RunBuilder, p: int) -> dict:
    _acked(b, p)
    c = dict(topic="hw", partition=p)
    _line(b, "c0", "leader-change", **c, leader=1, epoch=3, isr=[1, 2], version=5)
    bad = _line(b, "c0", "leader-change", **c, leader=2, epoch=3, isr=[1, 2], version=6)
    return _found("epoch-not-increasing", bad, 3, "the controller elected n2 in epoch 3, not above the previous epoch 3")


def truncate_below_hw(b: RunBuilder, p: int) -> dict:
    _acked(b, p)
    _line(b, "n1", "role", partition=p, role="leader", epoch=1)
    _line(b, "n1", "hw-change", partition=p, old=0, new=4, leo=5)
    _line(b, "n2", "role", partition=p, role="follower", epoch=1)
    hw = _line(b, "n2", "hw-change", partition=p, old=0, new=4, leo=5)
    bad = _line(b, "n2", "truncate", topic="hw", partition=p, **{"from": 5, "to": 2, "why": "hw"})
    return _found("truncate-below-hw", bad, 1, "n2 cut its log to 2 (hw), below its HW 4", hw, bad)


def isr_join_lagging(b: RunBuilder, p: int) -> dict:
    """n1 leads epoch 2 (from offset 4) and proposes n2 with its LEO at 3: short of the HW 5 and of the
    epoch's start (KAFKA-7128); n3, caught up to both, is no finding."""
    _acked(b, p)
    _line(b, "n1", "role", partition=p, role="leader", epoch=2)
    _line(b, "n1", "isr-expand-proposed", partition=p, replica=3, replica_leo=5, hw=5, epoch_start=4)
    bad = _line(b, "n1", "isr-expand-proposed", partition=p, replica=2, replica_leo=3, hw=5, epoch_start=4)
    return _found("isr-join-lagging", bad, 2,
                  "n1 proposed n2 for the ISR with its LEO at 3, short of the HW 5 and the start of its epoch at 4")


def stale_epoch_served(b: RunBuilder, p: int) -> dict:
    """n1 leads epoch 2 and serves n2's fetch carrying epoch 1; the one carrying epoch 2 is no finding."""
    _acked(b, p)
    _line(b, "n1", "role", partition=p, role="leader", epoch=2)
    _line(b, "n1", "follower-served", partition=p, replica=3, request="fetch", request_epoch=2)
    bad = _line(b, "n1", "follower-served", partition=p, replica=2, request="fetch", request_epoch=1)
    return _found("stale-epoch-served", bad, 2, "n1 leads epoch 2 and served a fetch of n2 carrying epoch 1")


def _poll_found(b: RunBuilder, p: int, kind: str, poll: int, offset, epoch, hw: int, detail: str,
                *before: dict) -> dict:
    """The example a rule broken by poll `poll` gives: its read row (placed READ_SLACK_NS after the poll's
    completion) last in the evidence, after `before`."""
    from checkers.protocol_trace import READ_SLACK_NS

    t = b.ops[poll]["time"]
    ts = b.wall(t) + READ_SLACK_NS
    read = {"ts": ts, "node": "client", "event": "read", "partition": p, "offset": offset, "epoch": epoch, "hw": hw,
            "reported_hw": hw, "index": poll, "time": t}
    return {"counts": {kind: 1}, "examples": {kind: [
        {"partition": p, "node": "client", "time": ts - b.start_wall_ns, "ts": ts, "epoch": epoch,
         "detail": detail, "promised": True, "evidence": [*before, read]}]}}


def _two_sends_led_by_n1(b: RunBuilder, p: int) -> dict:
    """Two sends acknowledged at offsets 0 and 1; n1 leads epoch 1 with HW 1 (LEO 2); returns its hw-change."""
    _same_clock(b)
    b.send(100 * p + 1, p, 1, offset=0)
    b.send(100 * p + 1, p, 2, offset=1)
    _line(b, "n1", "role", partition=p, role="leader", epoch=1)
    return _line(b, "n1", "hw-change", partition=p, old=0, new=1, leo=2)


def read_uncommitted(b: RunBuilder, p: int) -> dict:
    """A poll returned offset 1 and reported HW 1 (from the history alone: the native client's poll
    reports the HW of the fetch that returned its records), while the leader's HW was 1. The read is placed
    READ_SLACK_NS after the poll's completion."""
    _two_sends_led_by_n1(b, p)
    b.assign(100 * p + 2, p, 0)
    r = b.poll(100 * p + 2, p, 0, [(0, 1), (1, 2)], hw=1)
    b.final(p, [1, 2], process=100 * p + 9)
    return _poll_found(b, p, "read-uncommitted", r, 1, 1, 1, "a poll returned offset 1 with the HW it reported at 1")


def hw_reported_ahead(b: RunBuilder, p: int) -> dict:
    """The leader's HW is 1 (its LEO 2); a poll that returns nothing (epoch -1, as a Kafka client's, whose HW
    comes from a ListOffsets) is told the HW is 2. A poll told 1 before it is no finding. (The builder's
    run is a native one, so the row keeps `hw` as well; with no records, read-uncommitted has nothing to
    decide.)"""
    leader = _two_sends_led_by_n1(b, p)
    b.assign(100 * p + 2, p, 1)
    b.poll(100 * p + 2, p, 1, [], hw=1, epoch=-1)
    r = b.poll(100 * p + 2, p, 1, [], hw=2, epoch=-1)
    b.final(p, [1, 2], process=100 * p + 9)
    return _poll_found(b, p, "hw-reported-ahead", r, None, None, 2,
                       "a poll was told the HW is 2; no leader had an HW above 1 by then", leader)


def reported_before_flush(b: RunBuilder, p: int) -> dict:
    """With flush=always n2 fetches from 3 with its log flushed to 3 (fine), then from 5 flushed below 4."""
    _acked(b, p)
    _line(b, "n2", "role", partition=p, role="follower", epoch=1)
    _line(b, "n2", "leo-reported", partition=p, leo=3, flushed=3, epoch=1, leader=1)
    bad = _line(b, "n2", "leo-reported", partition=p, leo=5, flushed=4, epoch=1, leader=1)
    return _found("reported-before-flush", bad, 1,
                  "n2 told its leader its LEO was 5 with its log flushed only below 4 (flush=always)")


def flushed_past_truncation(b: RunBuilder, p: int) -> dict:
    """n3 cuts its log to 4 and lowers its flushed offset with it (fine), then cuts to 2 keeping it at 4."""
    _acked(b, p)
    _line(b, "n3", "role", partition=p, role="follower", epoch=2)
    _line(b, "n3", "truncate", topic="hw", partition=p, **{"from": 6, "to": 4, "why": "leader-epoch"},
          flushed=4, log_start=0)
    bad = _line(b, "n3", "truncate", topic="hw", partition=p, **{"from": 4, "to": 2, "why": "leader-epoch"},
                flushed=4, log_start=0)
    return _found("flushed-past-truncation", bad, 2,
                  "n3 cut its log to 2 (leader-epoch) and still counted it flushed up to 4")


def ack_undecided(b: RunBuilder, p: int) -> dict:
    """n1, elected, acknowledges offsets 0-1 (its ack line); the producer is told 0, 1 and 2 succeeded, and
    no leader logged an acknowledgement of 2 (a handler answering success for a timed-out produce)."""
    _line(b, "c0", "leader-change", topic="hw", partition=p, leader=1, epoch=0, isr=[1, 2, 3], version=0)
    _line(b, "n1", "role", partition=p, role="leader", epoch=0)
    _line(b, "n1", "hw-change", partition=p, old=0, new=2, leo=3)
    _line(b, "n1", "ack", partition=p, base=0, last=1, epoch=0, acks=-1, hw=2, isr=[1, 2, 3], min_isr=2,
          flushed=3)
    b.send(100 * p + 1, p, 1, offset=0)
    b.send(100 * p + 1, p, 2, offset=1)
    index = b.send(100 * p + 1, p, 3, offset=2)
    b.final(p, [1, 2, 3], process=100 * p + 9)
    from checkers.protocol_trace import READ_SLACK_NS

    t = b.ops[index]["time"]
    ts = b.wall(t) + READ_SLACK_NS
    sent = {"ts": ts, "node": "client", "event": "sent", "partition": p, "offset": 2, "value": 3, "index": index,
            "time": t}
    return {"counts": {"ack-undecided": 1}, "examples": {"ack-undecided": [
        {"partition": p, "node": "client", "time": ts - b.start_wall_ns, "ts": ts, "epoch": None,
         "detail": "a producer was told offset 2 succeeded; no leader logged an acknowledgement of it",
         "promised": True, "evidence": [sent]}]}}


def epoch_outlived_restart(b: RunBuilder, p: int) -> dict:
    """The controller elects n3 for epoch 4; n3 restarts and leads epoch 4 again without a new election.
    A broker's start line is node-wide (it resets n3 on every partition), so this scenario comes last."""
    _same_clock(b)
    _acked(b, p)
    b.event("n3", "ack", partition=p, base=0, last=0, epoch=3, acks=-1, hw=1, isr=[3], min_isr=1, flushed=1)
    elected = _line(b, "c0", "leader-change", topic="hw", partition=p, leader=3, epoch=4, isr=[3], version=7)
    ts = b.event("n3", "start", host="127.0.0.4", port=9004)
    start = {"ts": ts, "node": "n3", "event": "start", "host": "127.0.0.4", "port": 9004, "partition": p,
             "time": ts - b.start_wall_ns}
    bad = _line(b, "n3", "role", partition=p, role="leader", epoch=4)
    return _found("epoch-outlived-restart", bad, 4,
                  "n3 restarted and led epoch 4, which the controller had elected it for before the restart",
                  elected, start, bad)


PROTOCOL_SCENARIOS = [protocol_clean, hw_above_leo, leader_hw_decrease, follower_hw_ahead, ack_above_hw,
                      ack_below_min_isr, ack_before_flush, acked_not_durable, acked_not_durable_damaged,
                      damaged_record_kept, epoch_two_leaders, leader_not_elected,
                      election_outside_isr, epoch_not_increasing, truncate_below_hw, isr_join_lagging,
                      stale_epoch_served, read_uncommitted, hw_reported_ahead, reported_before_flush,
                      flushed_past_truncation, ack_undecided, epoch_outlived_restart]   # node-wide start: last
SCENARIOS += PROTOCOL_SCENARIOS
