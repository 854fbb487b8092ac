"""Parsing a node's event log (docs/formats.md "Node event logs") for the EventLogs capability.

The backends differ only in how they fetch the bytes (a local file, SFTP, a Docker archive); this module
turns them into one dict per line. A broker killed mid-write leaves a torn line, and a restarted broker
appends after it, so a torn line can sit anywhere in the file: every line that is not a JSON object is
skipped, not only the last.
"""
from __future__ import annotations

import json


def parse_event_log(data: bytes) -> list[dict]:
    """The JSON-object lines of an event log, in file order."""
    out = []
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out
