"""Which anomaly kinds fail a run: defaults, test.json `config.checker`, and the CLI's --fail-on/--allow.

Default: the kinds whose `fails_by_default` is set in rundir/kinds.py, which is every kind except
`group-reread` (a consumer group promises at-least-once: a record read again after a rebalance is
counted only), `duplicate` (counted only, unless the producer claims idempotence in test.json
`config.client.idempotence`, `config.producer.idempotent` or `config.idempotent`) and `hw-regression-cross-epoch` (a new leader's HW
may legitimately lag the old leader's). `realtime-order` fails unless the producer's acks were 0 or 1
(test.json `config.client.acks`, as the harness records it, or `config.producer.acks`: 0, 1, -1, "all",
"-1"; absent means the harness's default, all): an acks=1 leader may lose an acknowledged write and hand
its offset out again, which lost-write already reports. `key-reorder` follows the same acks: an acks=1
leader may lose a key's acknowledged record while a stale retry's copy of it lands later, above the
key's next record. Then `config.checker.allow` /
`config.checker.fail_on` apply, then the CLI's `--allow` / `--fail-on` (the CLI wins). A protocol kind
(the white-box rules of broker/rules) fails only where the configuration promises its rule
(`broker.rules.promised`: e.g. election-outside-isr not with unclean elections, truncate-below-hw not with
pre-0.11 HW truncation's unsafe settings).
"""
from __future__ import annotations

from typing import Any, Iterable

from broker.config_keys import parse_acks
from rundir import formats as rf
from rundir import kinds
from broker.errors import ConfigError

DEFAULT_ALLOWED = tuple(k.name for k in kinds.KINDS if not k.fails_by_default)


def producer_idempotent(config: dict[str, Any]) -> bool:
    """Whether the run's producers were idempotent: the harness's `config.client.idempotence`, or
    `config.producer.idempotent` / `config.idempotent` for other tools' histories."""
    producer = config.get(rf.CONFIG_PRODUCER)
    if isinstance(producer, dict) and producer.get(rf.CONFIG_IDEMPOTENT):
        return True
    client = config.get(rf.CONFIG_CLIENT)
    if isinstance(client, dict) and client.get(rf.CONFIG_IDEMPOTENCE) is True:
        return True
    return bool(config.get(rf.CONFIG_IDEMPOTENT))


def producer_acks(config: dict[str, Any]) -> int | str | None:
    """The producer's acks as 0, 1 or "all" (test.json `config.client.acks`, else `config.producer.acks`);
    None when neither says (or says something else)."""
    for section in (rf.CONFIG_CLIENT, rf.CONFIG_PRODUCER):
        sub = config.get(section)
        raw = sub.get(rf.CONFIG_ACKS) if isinstance(sub, dict) else None
        if isinstance(raw, bool) or raw is None:
            continue
        try:
            return parse_acks(raw)
        except ValueError:
            continue
    return None


def _kinds(names: Iterable[str], where: str) -> list[str]:
    names = list(names)
    for n in names:
        if n not in rf.ANOMALY_KINDS:
            raise ConfigError(f"{where}: unknown anomaly kind {n!r} (known: {', '.join(rf.ANOMALY_KINDS)})")
    return names


def unpromised_protocol_kinds(config: dict[str, Any], rules: Any = None) -> set[str]:
    """The protocol rules (broker/rules) the run does not promise: reported, not failing. `rules`: the
    run's RuleSettings when known (checkers/protocol_trace.run_facts, which also knows what the run did),
    else they are read from the configuration alone."""
    from broker.rules import promised
    from checkers.protocol_trace import settings_from

    return set(kinds.PROTOCOL_NAMES) - promised(rules if rules is not None else settings_from({"config": config}))


def failing_kinds(config: dict[str, Any] | None, fail_on: Iterable[str] = (), allow: Iterable[str] = (),
                  rules: Any = None) -> list[str]:
    config = config or {}
    failing = set(rf.ANOMALY_KINDS) - set(DEFAULT_ALLOWED)
    if producer_idempotent(config):
        failing.add(kinds.DUPLICATE.name)
    if producer_acks(config) in (0, 1):
        failing.discard(kinds.REALTIME_ORDER.name)
        failing.discard(kinds.KEY_REORDER.name)
    failing -= unpromised_protocol_kinds(config, rules)
    checker = config.get(rf.CONFIG_CHECKER) or {}
    if not isinstance(checker, dict):
        raise ConfigError(f"{rf.TEST_JSON}: config.{rf.CONFIG_CHECKER} must be an object")
    for key, add in ((rf.CONFIG_CHECKER_ALLOW, False), (rf.CONFIG_CHECKER_FAIL_ON, True)):
        names = checker.get(key) or []
        if isinstance(names, str) or not isinstance(names, list):
            raise ConfigError(f"{rf.TEST_JSON}: config.{rf.CONFIG_CHECKER}.{key} must be a list of anomaly kinds")
        for n in _kinds(names, f"{rf.TEST_JSON} config.{rf.CONFIG_CHECKER}.{key}"):
            (failing.add if add else failing.discard)(n)
    for n in _kinds(allow, "--allow"):
        failing.discard(n)
    for n in _kinds(fail_on, "--fail-on"):
        failing.add(n)
    return [k for k in rf.ANOMALY_KINDS if k in failing]
