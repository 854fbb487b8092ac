"""The shape of the code, measured: the figures the "room for what comes next" issue sets targets for.

Read off the source with `ast` (nothing is imported or run), for the project's own folders (not tests,
not the virtualenv):

- long functions: over 60 lines outside tests, and over 100 lines in checkers/;
- wide functions: more than 6 parameters (self and cls not counted) outside benchmarks and tests;
- fault dispatch: comparisons of a `kind` or `do` (a name or an attribute) with a string of the fault
  vocabulary (nemesis/faults.py: a window kind, a fault name, a scenario verb) in nemesis/ and harness/,
  the branches of fault chains (a completion type's `kind == "info"` or the checkers' anomaly kinds are
  not fault dispatch);
- `Step` classes: classes named Step;
- kind-name literals: string constants (docstrings aside) equal to an anomaly kind's name
  (rundir/kinds.py), outside the two declaration sites: rundir/kinds.py, and broker/rules/names.py, which
  declares the protocol rules' names (rundir/kinds.py builds the protocol kinds from broker/rules). A
  constant that only happens to spell a kind's name while naming something else (a message fault called
  "duplicate", the anomaly family "divergence") is declared in NOT_KIND_REFERENCES with what it names
  instead, and how many of it the file holds; those are not counted (nor the table's own strings), and
  --list prints them;
- the checker's entry points: `check_run`'s parameters and the reference `analyze`'s length.

    .venv/bin/python benchmarks/structure.py [--list]

--list prints every function, comparison and literal counted, by file and line.
"""
from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import scenario  # noqa: E402
from nemesis import faults  # noqa: E402
from rundir import kinds  # noqa: E402

FOLDERS = ("harness", "nemesis", "workloads", "checkers", "clusters", "broker", "rundir", "reports", "simulator",
           "benchmarks", "scripts")
LONG, CHECKER_LONG, WIDE = 60, 100, 6
# where the kind names are declared, so not counted as literals (broker/rules/names.py: the protocol rules')
DECLARED = ("rundir/kinds.py", "broker/rules/names.py")
# string constants that spell an anomaly kind's name but are no reference to the kind: (file, string, how
# many the file holds, what they name instead). A file holding more of them than declared gets the rest
# counted as kind-name literals.
NOT_KIND_REFERENCES: tuple[tuple[str, str, int, str], ...] = (
    ("broker/replication/producers.py", "duplicate", 1,
     "an idempotent append's outcome: the producer's batch was appended before"),
    ("simulator/actions.py", "duplicate", 1,
     "a simulated message fault's action kind: an in-flight message is copied"),
    ("rundir/evidence.py", "divergence", 1,
     "an anomaly family's name (Kind.family: the module checkers/anomalies/divergence.py)"),
)


@dataclass(frozen=True)
class Function:
    file: str
    line: int
    name: str
    lines: int
    params: int


def _sources() -> list[Path]:
    out = []
    for folder in FOLDERS:
        out += sorted(p for p in (ROOT / folder).rglob("*.py") if "mutants" not in p.parts)
    return out


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return len([n for n in names if n not in ("self", "cls")])


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constant nodes that are docstrings (module, class and function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _table_strings(tree: ast.AST) -> set[int]:
    """ids of the constant nodes of this file's NOT_KIND_REFERENCES table (its strings name no kind)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "NOT_KIND_REFERENCES":
            out |= {id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    return out


def _named(node: ast.AST) -> str | None:
    """`kind` for the name `kind` or an attribute `x.kind`."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _strings(node: ast.AST) -> set[str]:
    """The string constants of a comparator: "a", or ("a", "b")."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {c.value for c in items if isinstance(c, ast.Constant) and isinstance(c.value, str)}


def _excuse(literals: list[tuple[str, int, str]]
            ) -> tuple[list[tuple[str, int, str]], list[tuple[str, int, str, str]]]:
    """(the kind-name literals, the ones NOT_KIND_REFERENCES declares: up to the declared number of each
    string per file, in line order, with what they name)."""
    allowance = {(f, text): (n, why) for f, text, n, why in NOT_KIND_REFERENCES}
    kept: list[tuple[str, int, str]] = []
    excused: list[tuple[str, int, str, str]] = []
    used: dict[tuple[str, str], int] = {}
    for f, line, text in sorted(literals):
        n, why = allowance.get((f, text), (0, ""))
        if used.get((f, text), 0) < n:
            used[(f, text)] = used.get((f, text), 0) + 1
            excused.append((f, line, text, why))
        else:
            kept.append((f, line, text))
    return kept, excused


def measure() -> dict:
    kind_names = {k.name for k in kinds.KINDS}
    # the scenario's own actions that are no fault (its `elect` asks the admin client) are not fault names
    vocabulary = (set(faults.KINDS) | set(faults.NAMES) | set(faults.VERBS)) - (set(scenario.ACTIONS) - set(faults.VERBS))
    functions: list[Function] = []
    dispatch: list[tuple[str, int, str]] = []
    steps: list[tuple[str, int]] = []
    literals: list[tuple[str, int, str]] = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(), filename=rel)
        docs = _docstrings(tree) | (_table_strings(tree) if rel == "benchmarks/structure.py" else set())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(Function(rel, node.lineno, node.name, node.end_lineno - node.lineno + 1,
                                          _params(node)))
            elif isinstance(node, ast.ClassDef) and node.name == "Step":
                steps.append((rel, node.lineno))
            elif (isinstance(node, ast.Compare) and _named(node.left) in ("kind", "do")
                  and rel.startswith(("nemesis/", "harness/"))):
                if any(_strings(c) & vocabulary for c in node.comparators):
                    dispatch.append((rel, node.lineno, _named(node.left)))
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in kind_names
                  and id(node) not in docs and rel not in DECLARED):
                literals.append((rel, node.lineno, node.value))
    literals, excused = _excuse(literals)
    outside_bench = [f for f in functions if not f.file.startswith("benchmarks/")]
    check_run = next((f for f in functions if f.file == "checkers/check.py" and f.name == "check_run"), None)
    analyze = next((f for f in functions if f.file == "checkers/reference.py" and f.name == "analyze"), None)
    return {
        "long": [f for f in functions if f.lines > LONG],          # tests are never read here
        "checker_long": [f for f in functions if f.file.startswith("checkers/") and f.lines > CHECKER_LONG],
        "wide": [f for f in outside_bench if f.params > WIDE],
        "dispatch": dispatch, "steps": steps, "literals": literals, "not_kind_references": excused,
        "check_run_params": check_run.params if check_run else None,
        "analyze_lines": analyze.lines if analyze else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print every item counted")
    args = ap.parse_args()
    m = measure()
    by_file: dict[str, int] = {}
    for f, _, _ in m["literals"]:
        by_file[f] = by_file.get(f, 0) + 1
    rows = [
        (f"functions over {LONG} lines (outside tests)", len(m["long"]), "<= 15"),
        (f"functions over {CHECKER_LONG} lines in checkers/", len(m["checker_long"]), "0"),
        (f"functions of more than {WIDE} parameters (outside benchmarks and tests)", len(m["wide"]), "0"),
        ("`kind` / `do` compared with a fault's name (nemesis/, harness/)", len(m["dispatch"]),
         "0 fault dispatch chains"),
        ("`Step` classes", len(m["steps"]), "1"),
        (f"kind-name literals outside their declarations ({len(by_file)} modules)", len(m["literals"]), "0"),
        ("check_run's parameters", m["check_run_params"], "<= 3"),
        ("lines of checkers/reference.py analyze", m["analyze_lines"], "<= 60"),
    ]
    width = max(len(r[0]) for r in rows)
    for what, n, target in rows:
        print(f"  {what:<{width}}  {n!s:>5}   target {target}")
    if args.list:
        for key in ("long", "checker_long", "wide"):
            print(f"\n{key}:")
            for f in sorted(m[key], key=lambda f: (-f.lines if key != "wide" else -f.params, f.file)):
                print(f"  {f.file}:{f.line} {f.name}: {f.lines} lines, {f.params} parameters")
        print("\ndispatch by module:")
        per: dict[str, int] = {}
        for f, _, _ in m["dispatch"]:
            per[f] = per.get(f, 0) + 1
        for f, n in sorted(per.items(), key=lambda x: -x[1]):
            print(f"  {f}: {n}")
        print("\nkind-name literals by module:")
        for f, n in sorted(by_file.items(), key=lambda x: -x[1]):
            print(f"  {f}: {n}")
        print("\nnot kind references (NOT_KIND_REFERENCES, not counted):")
        for f, line, text, why in m["not_kind_references"]:
            print(f"  {f}:{line} {text!r}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
