"""The import graph of gateway/, agents/, engine/ and grammars/ (installed as conch.gateway, conch.agents...),
read from the source with `ast`: no circle, imports only point down gateway -> agents -> engine -> grammars, and
every import of a layer names it under `conch.` (the bare names are other projects', `agents` the Agents SDK's).

Every import counts, wherever it stands (module level, inside a function, under `if TYPE_CHECKING:`), so a
circle cannot hide behind a lazy import. Importing `a.b.c` also runs the `__init__` of `a.b` (and of `a`),
so those count as edges too, except a package the importing module is itself inside (Python has that one in
sys.modules already). A registry's "module:attribute" strings are not imports and are not read.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("gateway", "agents", "engine", "grammars")     # top to bottom: imports only point down this list


def module_files() -> dict[str, Path]:
    """Dotted module name (conch.<layer>...) -> file, for every module of the four packages."""
    files = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            parts = ["conch", *path.relative_to(ROOT).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def imported_names(module: str, path: Path) -> list[tuple[str, int]]:
    """(dotted name, line) of every import in the file, relative imports made absolute; `from m import x`
    gives both `m.x` (x may be a submodule) and `m`."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            names += [(f"{base}.{alias.name}", node.lineno) for alias in node.names] + [(base, node.lineno)]
    return names


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: line of the import}, within the four packages."""
    files = module_files()
    graph: dict[str, dict[str, int]] = {}
    for module, path in files.items():
        edges = graph.setdefault(module, {})
        own = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for name, line in imported_names(module, path):
            if name not in files:
                continue
            parts = name.split(".")
            for target in [".".join(parts[:i]) for i in range(1, len(parts))] + [name]:
                inside = own == target or own.startswith(target + ".")
                if target in files and target != module and not inside:
                    edges.setdefault(target, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(graph[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_four_packages_are_read():
    graph = import_graph()
    assert {module.split(".")[1] for module in graph} == set(LAYERS)
    assert "conch.engine.engine" in graph["conch.gateway.app"]              # the graph sees real imports


def test_no_import_circle():
    graph = import_graph()
    report = []
    for component in cycles(graph):
        members = set(component)
        report.append("circle:\n" + "\n".join(f"  {m}:{line} -> {t}" for m in component
                                              for t, line in sorted(graph[m].items()) if t in members))
    assert not report, "\n".join(report)


def layer(module: str) -> str:
    return module.split(".")[1]


def test_imports_only_point_down_the_layers():
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    upward = [f"{module}:{line} imports {target}" for module, edges in import_graph().items()
              for target, line in edges.items() if rank[layer(target)] < rank[layer(module)]]
    assert not upward, "\n".join(upward)


def test_the_anthropic_face_imports_nothing_of_the_openai_face():
    """Face-neutral pieces (choices, the JSON body route, the wire base model) live in gateway/, so one face
    never reaches into another."""
    crossing = [f"{module}:{line} imports {target}" for module, edges in import_graph().items()
                if module.startswith("conch.gateway.anthropic") for target, line in edges.items()
                if target.startswith("conch.gateway.openai")]
    assert not crossing, "\n".join(crossing)


def test_a_circle_is_found():
    """The checker itself can fail: a planted circle (a -> b -> c -> a) beside an acyclic edge is reported."""
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_every_layer_import_names_the_namespace():
    """`import engine...` would find nothing installed (or another project's `engine`): the source, the tests
    and the examples import the layers as conch.<layer>. `from agents import` alone is the Agents SDK's."""
    bare = []
    for path in sorted(ROOT.rglob("*.py")):
        if any(part.startswith(".") or part in ("build", "dist") for part in path.relative_to(ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                head, _, rest = name.partition(".")
                if head in LAYERS and (head != "agents" or rest.split(".")[0] in _own_agents()):
                    bare.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not bare, "\n".join(bare)


def _own_agents() -> set[str]:
    return {p.stem for p in (ROOT / "agents").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
