"""The anomaly kinds explained for a reader, and the checker's examples turned into table rows.

The explanations are the registry's (rundir/kinds.py); a kind the registry does not know (a newer
results.json) is still shown, with a line saying the report has no description of it.

Examples are rendered generically: the fields the report knows come first (partition, offset, value,
index, time), any other field the checker adds is shown as its own column; `time` and `*_time` fields
(history nanoseconds) are shown in seconds. Fields naming history entries (`index`, `*_index`, `indices`,
`*_indices`) become links to the history excerpt. Each example shown can carry a story of what happened
around it (reports/story.py), rendered here as escaped HTML.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from markupsafe import Markup, escape

from rundir import formats as runformat
from rundir import kinds
from rundir.evidence import NOT_EXERCISED
from reports.jsonfast import dumps_compact
from reports.totals import LOST, partition_totals

# what the report tells a reader about each kind (declared with the kind in rundir/kinds.py)
EXPLANATIONS: dict[str, str] = {k.name: k.explanation for k in kinds.KINDS}

PREFERRED = ("partition", "offset", "value", "index", "time", "committed")
# what the tables call the checker's field names (the name itself is the header's tooltip, and each example's
# JSON is one click away); a field not listed here is shown with spaces for underscores
LABELS = {"index": "history #", "invoke_index": "invoked at", "time": "time", "committed": "committed",
          "final_values_at_offset": "final log at the acked offset", "at_offset": "holds at the acked offset",
          "value_at": "holds the value at offset",
          "crc_ok": "CRC ok", "hw": "HW", "leo": "LEO", "isr": "ISR", "acked_epoch": "acked in epoch",
          "epoch": "epoch", "values": "values", "first_index": "first at", "last_index": "last at"}


def label(name: str) -> str:
    """A field name for people: 'final_values_at_offset' -> 'final log at this offset'; an unlisted
    '*_index' field 'x (history #)', anything else its words."""
    if name in LABELS:
        return LABELS[name]
    if name.endswith("_index"):
        return f"{name[:-len('_index')].replace('_', ' ')} (history #)"
    return name.replace("_", " ")
MAX_EXAMPLES_SHOWN = 50
MAX_LIST_ITEMS = 12   # nested list entries shown in one cell
MAX_SCALARS = 40      # numbers shown in one cell's list


def is_index_field(name: str) -> bool:
    return name == "index" or name.endswith("_index") or name == "indices" or name.endswith("_indices")


def _walk_indexes(value: Any, key: str | None, out: dict[int, None], limit: int, depth: int = 0) -> None:
    if len(out) >= limit or depth > 4:
        return
    if key is not None and is_index_field(key):
        for i in (value if isinstance(value, list) else [value]):
            if isinstance(i, int) and not isinstance(i, bool) and len(out) < limit:
                out[i] = None
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _walk_indexes(v, str(k), out, limit, depth + 1)
    elif isinstance(value, list):
        for v in value[:100]:
            _walk_indexes(v, None, out, limit, depth + 1)


def referenced_indexes(results: dict[str, Any] | None, limit: int = 600) -> list[int]:
    """History indexes named by the examples shown (at any depth), in order of first mention, at most `limit`."""
    out: dict[int, None] = {}
    for _kind, body in _kinds(results):
        for ex in (body.get("examples") or [])[:MAX_EXAMPLES_SHOWN]:
            if isinstance(ex, dict):
                _walk_indexes(ex, None, out, limit)
    return list(out)


def _kinds(results: dict[str, Any] | None):
    anomalies = (results or {}).get("anomalies")
    if not isinstance(anomalies, dict):
        return []
    ordered = [k for k in runformat.ANOMALY_KINDS if k in anomalies]
    ordered += sorted(k for k in anomalies if k not in runformat.ANOMALY_KINDS)
    return [(k, anomalies[k]) for k in ordered if isinstance(anomalies[k], dict)]


@dataclass
class ExampleCell:
    """A table cell as tokens: ("text", s), ("key", name), ("link", history index), ("br", "")."""
    parts: list[tuple[str, Any]] = field(default_factory=list)
    href: str = ""  # e.g. the offset's row in the replica logs

    @property
    def text(self) -> str:
        return "".join(str(v) if k != "link" else f"#{v}" for k, v in self.parts if k != "br")


@dataclass
class AnomalyKind:
    kind: str
    count: int
    fails_run: bool
    explanation: str
    columns: list[str]
    rows: list[list[ExampleCell]]
    more: int  # examples the checker counted but the report does not list
    reported: bool = True
    stories: list[Markup] = field(default_factory=list)  # per row: what happened (reports/story.py), or ""
    raw: list[str] = field(default_factory=list)          # per row: the example as the checker wrote it (JSON)
    # False where the run's workload records nothing the kind reads (results.json status `not-exercised`):
    # nothing was checked, and the page does not count it as checked; `why` is the status reason
    exercised: bool = True
    why: str = ""

    @property
    def headers(self) -> list[tuple[str, str]]:
        """(label for people, the checker's field name) per column."""
        return [(label(c), c) for c in self.columns]


def story_html(story: Any) -> Markup:
    """A reports.story.Story as HTML: its text escaped, its links <a href="#..."> (href escaped too)."""
    if story is None:
        return Markup("")
    out = []
    for seg in story.segments:
        if seg.href:
            out.append(Markup('<a class="story-link" href="{}">{}</a>').format(seg.href, seg.text))
        else:
            out.append(escape(seg.text))
    return Markup("").join(out)


def _scalar(value: Any, key: str | None) -> str:
    if key is not None and (key == "time" or key.endswith("_time")) and isinstance(value, int) \
            and not isinstance(value, bool):
        return f"{value / 1e9:.3f} s"
    if value is None:
        return "none"   # results.json's null: value_at none is "this replica does not hold it"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    return dumps_compact(value)


def _tokens(value: Any, key: str | None, depth: int) -> list[tuple[str, Any]]:
    """Any JSON value as readable tokens: history indexes become links, nested dicts key=value lines."""
    if key is not None and is_index_field(key):
        items = value if isinstance(value, list) else [value]
        out: list[tuple[str, Any]] = []
        for i, item in enumerate(items):
            if i:
                out.append(("text", " "))
            is_int = isinstance(item, int) and not isinstance(item, bool)
            out.append(("link", item) if is_int else ("text", _scalar(item, None)))
        return out
    if depth > 3:
        return [("text", dumps_compact(value))]
    if isinstance(value, dict):
        out = []
        flat = all(not isinstance(v, (dict, list)) for v in value.values())
        for n, (k, v) in enumerate(value.items()):
            if depth == 0 and not flat:
                if n:
                    out.append(("br", ""))
                out += [("key", f"{label(str(k))}: ")] + _tokens(v, str(k), depth + 1)
            else:
                if n:
                    out.append(("text", "; "))
                out += [("key", f"{label(str(k))} ")] + _tokens(v, str(k), depth + 1)
        return out if depth <= 1 else [("text", "{")] + out + [("text", "}")]
    if isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value):
            more = f", … {len(value) - MAX_SCALARS} more" if len(value) > MAX_SCALARS else ""
            return [("text", "[" + ", ".join(_scalar(v, None) for v in value[:MAX_SCALARS]) + more + "]")]
        out = []
        for n, v in enumerate(value[:MAX_LIST_ITEMS]):
            if n:
                out.append(("br", "") if depth == 0 else ("text", "; "))
            out += _tokens(v, None, depth + 1)
        if len(value) > MAX_LIST_ITEMS:
            out += [("br", "") if depth == 0 else ("text", "; "), ("text", f"… {len(value) - MAX_LIST_ITEMS} more")]
        return out
    return [("text", _scalar(value, key))]


def _cell(name: str, value: Any) -> ExampleCell:
    if isinstance(value, bool):
        return ExampleCell([("text", "yes" if value else "no")])
    return ExampleCell(_tokens(value, name, 0))


def anomaly_kinds(results: dict[str, Any] | None, offset_anchors: set[tuple[int, int]] = frozenset(),
                  story: Callable[[str, dict[str, Any]], Any] | None = None) -> list[AnomalyKind]:
    """Every anomaly kind (the known ones always, in the documented order), with example rows.

    offset_anchors: (partition, offset) rows present in the replica logs; an example's offset links there.
    story: (kind, example) -> reports.story.Story or None, told under each example shown.
    """
    present = dict(_kinds(results))
    names = list(runformat.ANOMALY_KINDS) + [k for k in present if k not in runformat.ANOMALY_KINDS]
    out = []
    for kind in names:
        body = present.get(kind)
        if body is None:
            out.append(AnomalyKind(kind, 0, True, EXPLANATIONS.get(kind, ""), [], [], 0, reported=False))
            continue
        examples = [e for e in (body.get("examples") or []) if isinstance(e, dict)]
        shown = examples[:MAX_EXAMPLES_SHOWN]
        columns = [c for c in PREFERRED if any(c in e for e in shown)]
        for e in shown:
            for k in e:
                if k not in columns:
                    columns.append(k)
        rows = []
        for e in shown:
            row = [_cell(c, e[c]) if c in e else ExampleCell() for c in columns]
            key = (e.get("partition"), e.get("offset"))
            if "offset" in columns and key in offset_anchors:
                row[columns.index("offset")].href = f"#p{key[0]}-o{key[1]}"
            rows.append(row)
        count = body.get("count")
        count = count if isinstance(count, int) else len(examples)
        stories = [story_html(story(kind, e)) for e in shown] if story is not None else []
        explanation = EXPLANATIONS.get(kind, "A kind of anomaly this report has no description of.")
        if kind == LOST:
            explanation += loss_shape_sentence(results)
        exercised = body.get("status") != NOT_EXERCISED
        out.append(AnomalyKind(kind, count, bool(body.get("fails_run", True)), explanation,
                               columns, rows, max(0, count - len(shown)), stories=stories,
                               raw=[dumps_compact(e) for e in shown], exercised=exercised,
                               why="" if exercised else str(body.get("status_reason") or "")))
    return out


def loss_shape_sentence(results: dict[str, Any] | None) -> str:
    """Where the lost writes fall among each partition's acknowledged writes (results.json `loss_shape`),
    as a sentence after the lost-write explanation: ' Where they sit among the acknowledged writes of
    their partition, in offset order (a stretch is a run of consecutive acknowledged writes that were all lost):
    partition 0: 3 at the start (in 1 stretch), 12 at the end (in 2 stretches).' Empty without it."""
    shapes = [(p, t.shape_text) for p, t in partition_totals(results).items() if t.shape_text]
    if not shapes:
        return ""
    return (" Where they sit among the acknowledged writes of their partition, in offset order (a stretch is a run "
            "of consecutive acknowledged writes that were all lost): "
            + "; ".join(f"partition {p}: {text}" for p, text in shapes) + ".")


def example_times(results: dict[str, Any] | None, op_times: dict[int, float]) -> list[tuple[float, str, int]]:
    """(seconds, kind, example number) of every shown example with a known time, for timeline markers."""
    out = []
    for kind, body in _kinds(results):
        for n, ex in enumerate((body.get("examples") or [])[:MAX_EXAMPLES_SHOWN]):
            if not isinstance(ex, dict):
                continue
            t = None
            if isinstance(ex.get("index"), int) and ex["index"] in op_times:
                t = op_times[ex["index"]]
            elif isinstance(ex.get("time"), int) and not isinstance(ex.get("time"), bool) and ex["time"] > 0:
                t = ex["time"] / 1e9
            if t is not None:
                out.append((t, kind, n))
    return out
