"""genq's modules import one another one way only, lazy and TYPE_CHECKING imports included."""

import ast
from pathlib import Path

import genq

PACKAGE = Path(genq.__file__).parent


def _imports(path: Path) -> set[str]:
    """The genq modules ``path`` imports anywhere in its body (a function, an ``if``, ...)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                base = node.module
            elif node.level == 0 and (node.module or "").startswith("genq."):
                base = node.module.removeprefix("genq.")
            else:
                continue
            names = [base] if base else [alias.name for alias in node.names]
            found.update(name.split(".")[0] for name in names)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("genq."))
    return found


def _graph() -> dict[str, set[str]]:
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    return {m: _imports(PACKAGE / f"{m}.py") & modules for m in modules}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for dep in sorted(graph[module]):
            if state.get(dep) == "open":
                return [*path[path.index(dep) :], dep] if dep in path else [module, dep]
            if dep not in state and (found := visit(dep, [*path, dep])):
                return found
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module, [module])):
            return found
    return None


def test_module_graph_of_genq_has_no_cycle():
    graph = _graph()
    assert graph["_queue"] >= {"_worker", "_active_job"}  # the walk sees the imports it checks
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_module_graph_finds_a_lazy_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    tree = {"a": {"b"}, "b": set()}
    assert _cycle(tree) is None
