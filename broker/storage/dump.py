"""Offline dump of a stopped broker's replicas: `python -m broker dump DATA_DIR --out DIR --node NODE`.

For every partition directory of DATA_DIR writes DIR/p<partition>.jsonl as docs/formats.md ("Replica
dumps") specifies: a meta line, then one line per record of the valid log in offset order. It never
modifies DATA_DIR: where start-up recovery would cut a torn or corrupt tail, the dump reports the size of
that tail as `torn_bytes` (and `leo` is the end of the valid log). If the tail starts with a record that
is well framed but fails its CRC, that record is also dumped, with `"crc_ok": false` (it is not part of
the valid log). Also runnable as `python -m broker.storage.dump`.

Exit status: 0 done, 2 bad input (missing or non-broker DATA_DIR, malformed checkpoint, bad arguments),
1 an I/O error writing the output. Errors are one line on stderr.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from broker.limits import INTERNAL_PREFIX
from broker.records import Record
from broker.storage.checkpoints import EPOCH_FILE, HW_FILE, CheckpointError, EpochCheckpoint, HwCheckpoint
from broker.storage.partition_store import ConfigError, check_data_dir, list_partitions, partition_dir_name
from broker.storage.scan import scan_partition

PROG = "broker dump"
_DECIMAL = re.compile(rb"-?(0|[1-9][0-9]*)\Z")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not argparse's usage block
        raise ConfigError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Dump a stopped broker's replicas as JSON lines (docs/formats.md).")
    p.add_argument("data_dir", metavar="DATA_DIR", help="the broker's data directory (read only)")
    p.add_argument("--out", required=True, metavar="DIR", help="where to write p<partition>.jsonl files")
    p.add_argument("--node", required=True, metavar="NODE", help="node name to put in the meta lines, e.g. n1")
    return p


def value_json(data: bytes | None) -> int | str | None:
    """A decimal integer (canonical: no '+', no leading zeros) becomes a JSON int, a null value (a Kafka
    tombstone) null, anything else a string."""
    if data is None:
        return None
    if _DECIMAL.match(data):
        return int(data)
    return data.decode("utf-8", "backslashreplace")


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


INTERNAL_DUMPS = "internal"     # the subdirectory of the internal topics' dumps


def _record_line(r: Record, crc_ok: bool) -> str:
    obj = {"kind": "record", "offset": r.offset, "epoch": r.epoch, "value": value_json(r.value),
           "key": _text(r.key), "timestamp": r.timestamp, "crc_ok": crc_ok}
    if r.headers:
        obj["headers"] = [[k, _text(v)] for k, v in r.headers]
    if r.producer_id >= 0:
        obj["producer"] = [r.producer_id, r.producer_epoch, r.sequence]
    return _line(obj)


def dump_partition(directory: Path, topic: str, partition: int, node: str) -> list[str]:
    """The JSON lines of one replica (meta first). Raises CheckpointError on a malformed checkpoint."""
    scan = scan_partition(directory, keep_records=True)
    hw = HwCheckpoint(directory / HW_FILE).read()
    epochs = EpochCheckpoint(directory / EPOCH_FILE).read()
    lines = [_line({"kind": "meta", "node": node, "topic": topic, "partition": partition,
                    "log_start": scan.log_start, "leo": scan.leo, "hw": 0 if hw is None else hw,
                    "epochs": [[e, s] for e, s in epochs], "torn_bytes": scan.bytes_cut})]
    for seg in scan.segments:
        lines.extend(_record_line(r, True) for r in seg.records)
        if seg.bad_frame is not None:
            lines.append(_record_line(seg.bad_frame.record, False))
    return lines


def dump(data_dir: Path, out_dir: Path, node: str) -> list[Path]:
    """Dump every partition of `data_dir` into `out_dir`; return the files written. The test's topic goes
    to p<partition>.jsonl; an internal topic's partitions (the groups' __consumer_offsets) to
    internal/<topic>-p<partition>.jsonl, beside what the checker reads as the test's replicas."""
    check_data_dir(data_dir)
    partitions = list_partitions(data_dir)
    seen: dict[int, str] = {}
    targets = []
    for topic, partition in partitions:
        if topic.startswith(INTERNAL_PREFIX):
            targets.append((topic, partition, out_dir / INTERNAL_DUMPS / f"{topic}-p{partition}.jsonl"))
            continue
        if partition in seen:
            raise ConfigError(f"{data_dir}: topics {seen[partition]!r} and {topic!r} both have partition "
                              f"{partition}; p<partition>.jsonl cannot hold both")
        seen[partition] = topic
        targets.append((topic, partition, out_dir / f"p{partition}.jsonl"))
    contents = [(path, dump_partition(data_dir / partition_dir_name(topic, partition), topic, partition, node))
                for topic, partition, path in targets]
    written = []
    for path, lines in contents:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(lines)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except ConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        written = dump(Path(args.data_dir), Path(args.out), args.node)
    except (ConfigError, CheckpointError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    print(f"{PROG}: {len(written)} replica(s) of {args.node} written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
