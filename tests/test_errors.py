"""The project's exception classes are few, and each concept has one: one ConfigError, one root.

Every class statement in the project's packages is read with `ast`; a class is an exception class when
one of its bases is a built-in exception or another exception class of the project."""
from __future__ import annotations

import ast
import builtins
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("broker", "simulator", "rundir", "clusters", "workloads", "nemesis", "checkers", "reports", "harness")
LIMIT = 25


def exception_classes() -> dict[str, list[str]]:
    """class name -> the modules defining it."""
    builtin = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
               and issubclass(getattr(builtins, n), BaseException)}
    classes = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef):
                    bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                             for b in node.bases}
                    classes.append((node.name, bases, str(path.relative_to(ROOT))))
    known, found = set(builtin), {}
    changed = True
    while changed:
        changed = False
        for name, bases, where in classes:
            if bases & known and where not in found.get(name, []):
                found.setdefault(name, []).append(where)
                known.add(name)
                changed = True
    return found


def test_the_scan_finds_the_known_errors():
    found = exception_classes()
    assert {"HighwaterError", "ConfigError", "ClusterError", "FormatError", "SimError"} <= set(found)


def test_at_most_25_exception_classes_and_one_of_each_name():
    found = exception_classes()
    listing = "\n".join(f"{name}: {', '.join(where)}" for name, where in sorted(found.items()))
    assert len(found) <= LIMIT, listing
    assert found["ConfigError"] == ["broker/errors.py"], listing
    assert [name for name, where in found.items() if len(where) > 1] == [], listing
