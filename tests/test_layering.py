"""The import graph goes one way (docs/architecture.md, "Layers"): no import reaches up a layer.

Every `import` and `from ... import` in the project's packages is read with `ast`, at module level and
inside functions alike (an import in a function body is still a dependency). Layers, bottom first:

    broker                      the broker, standalone: imports nothing else of the project
    simulator                   the simulated cluster, its search and shrinking: the broker's state machines
    rundir                      the run-directory contract, exit codes, settings: broker at most
    clusters, workloads         backends and workload clients: the two below
    nemesis                     faults: drives clusters
    checkers                    reads run directories: rundir and broker only, never the harness
    reports                     reads run directories and checker results, never the harness
    harness                     drives everything

and nothing imports a CLI module (harness/cli.py and the modules its COMMANDS table names) except
another CLI module.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ALLOWED: dict[str, set[str]] = {
    "broker": set(),
    "simulator": {"broker"},
    "rundir": {"broker"},
    "clusters": {"rundir", "broker"},
    "workloads": {"rundir", "broker"},
    "nemesis": {"clusters", "rundir", "broker"},
    "checkers": {"rundir", "broker"},
    "reports": {"checkers", "rundir", "broker"},
    "harness": {"reports", "checkers", "nemesis", "workloads", "clusters", "rundir", "simulator", "broker"},
}
PACKAGES = tuple(ALLOWED)


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name.removesuffix(".__init__")


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imports(path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import of a project module in `path`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, node.lineno))
            out += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
    return [(name, line) for name, line in out if name.split(".")[0] in PACKAGES]


def cli_modules(modules: dict[str, Path]) -> set[str]:
    """harness.cli and every module its COMMANDS table loads a command from."""
    from harness.cli import COMMANDS
    return {"harness.cli", *(target.split(":")[0] for target in COMMANDS.values())} & set(modules)


def test_the_graph_is_read():
    modules = project_modules()
    assert {"broker.server.app", "rundir.formats", "harness.runner", "checkers.check"} <= set(modules)
    assert any(name == "rundir.formats" for name, _ in imports(modules["rundir.store"]))


def upward_imports() -> list[str]:
    problems = []
    for module, path in project_modules().items():
        layer = module.split(".")[0]
        for name, line in imports(path):
            target = name.split(".")[0]
            if target != layer and target not in ALLOWED[layer]:
                problems.append(f"{path.relative_to(ROOT)}:{line}: {layer} imports {name} ({target} is not "
                                f"below {layer})")
    return sorted(set(problems))


def test_no_import_reaches_up_a_layer():
    assert upward_imports() == []


def test_only_the_cli_imports_cli_modules():
    modules = project_modules()
    cli = cli_modules(modules)
    assert "harness.run_command" in cli and "checkers.cli" in cli
    problems = sorted({f"{path.relative_to(ROOT)}:{line}: {module} imports the CLI module {name}"
                       for module, path in modules.items() if module not in cli
                       for name, line in imports(path) if name in cli})
    assert problems == []


@pytest.mark.parametrize("layer", PACKAGES)
def test_the_layer_rules_can_fail(layer, tmp_path, monkeypatch):
    """A known-bad import is reported: each layer's rule is live, not vacuous."""
    above = [p for p in PACKAGES if p != layer and p not in ALLOWED[layer]]
    if not above:
        pytest.skip(f"{layer} may import every other layer")
    fake = ROOT / layer / "_layering_probe.py"
    monkeypatch.setattr("test_layering.project_modules",
                        lambda: {f"{layer}._layering_probe": fake})
    monkeypatch.setattr("test_layering.imports", lambda path: [(f"{above[0]}.anything", 3)])
    assert upward_imports() == [f"{layer}/_layering_probe.py:3: {layer} imports {above[0]}.anything "
                                f"({above[0]} is not below {layer})"]


def module_edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports (at module level or in a function). `from pkg import name`
    depends on pkg.name when that is a module, else on pkg; `import a.b.c` on the longest module prefix."""
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    prefixes = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
                    targets += [next((p for p in prefixes if p in modules), "")]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets += [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                            for a in node.names]
            edges[module] |= {t for t in targets if t in modules and t != module}
    return edges


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_cycles():
    """No two modules import each other, directly or around a circle, function-body imports included: a
    circle means one concept split across files that cannot be read (or loaded) one before the other."""
    assert import_cycles(module_edges(project_modules())) == []


def test_the_cycle_rule_can_fail():
    edges = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}, "b.p": {"b.q"}, "b.q": {"b.p"}}
    assert import_cycles(edges) == [["a.x", "a.y", "a.z"], ["b.p", "b.q"]]
    modules = project_modules()
    edges = module_edges(modules)
    assert "checkers.spark_driver" in edges["checkers.spark_session"]        # the graph is really read
    assert "checkers.spark_service" in edges["checkers.spark_session"]       # a function-body import


def test_the_architecture_doc_names_every_command_capability_and_package():
    """docs/architecture.md matches the code: every `highwater` command (harness/cli.py COMMANDS), every
    cluster capability (clusters/base.py CAPABILITIES) and every package of the layers."""
    from clusters.base import CAPABILITIES
    from harness.cli import COMMANDS

    doc = (ROOT / "docs" / "architecture.md").read_text()
    missing = ([f"command {c}" for c in COMMANDS if f"| `{c}` |" not in doc]
               + [f"capability {c.__name__}" for c in CAPABILITIES if f"| `{c.__name__}` |" not in doc]
               + [f"package {p}" for p in PACKAGES if f"| `{p}/` |" not in doc])
    assert missing == []


def test_a_main_block_comes_after_everything_it_calls():
    """`python -m pkg.module` runs the module top to bottom: an `if __name__ == "__main__":` block before
    the functions it calls raises NameError (harness/run_command.py had one), so it must be the last
    statement of its module."""
    misplaced = []
    for name, path in project_modules().items():
        body = ast.parse(path.read_text(), str(path)).body
        for i, node in enumerate(body):
            if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                    and ast.unparse(node.test).replace("'", '"') == '__name__ == "__main__"' and i != len(body) - 1):
                misplaced.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert misplaced == []
