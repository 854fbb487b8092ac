"""The replication protocol's promises, as rules over a stream of event rows (white-box checks).

One definition per rule, read by two adapters: the trace checker (checkers/protocol_trace.py) turns a
run's broker and controller event logs, and the history's polls, into rows; the simulator
(simulator/observe.py) turns the simulated world's state-machine events into the same rows. Both feed
`PartitionRules`, which keeps what the rows have said so far about one partition and reports each broken
promise as a `Violation` whose `kind` is the rule's name (an anomaly kind in rundir/kinds.py).

    from broker.rules import PartitionRules, RuleSettings, promised

    rules = PartitionRules(0, RuleSettings(acks="all", min_insync_replicas=2))
    for row in rows:                   # one partition's rows in time order
        for v in rules.feed(row):
            print(v.kind, v.node, v.detail)
    late = rules.finish()              # the rules decided at the end (leader-not-elected)
    promised(settings)                 # the rules a configuration promises; the others only report

A row is a dict: `ts` (nanoseconds; the simulator counts its events instead), `node` ("n1", "c0",
"client"), `src` ("broker", "controller", "client" or "nemesis"), `event` (an event name of
broker/eventlog.py, "read" for a consumer's poll, or "damaged" for a storage fault's damage to the node's
files), and that event's fields as the logs write them. A broker's node-wide rows (`start`, `damaged`) go
to every partition's rules. The rules and what each reads: `SUMMARIES` here, and
docs/architecture.md, "Protocol rules".
"""
from broker.rules.catalogue import (CLOCK_RULES, EVENTS_READ, RULES, SUMMARIES, PartitionRules, RuleSettings,
                                    Violation, promised, run)

__all__ = ["CLOCK_RULES", "EVENTS_READ", "RULES", "SUMMARIES", "PartitionRules", "RuleSettings", "Violation",
           "promised", "run"]
