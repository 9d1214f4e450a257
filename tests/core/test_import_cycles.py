"""No circle of imports between flowkit's modules, not even inside one package.

`test_layers` keeps units (sub-packages) pointing down; inside a unit two modules could
still import each other (one of them from inside a function, to dodge the import-time
error), which hides a seam: the shared part belongs in a module both import. Module-level
and function-level imports count, read from the source as `test_layers` reads them.
"""

from __future__ import annotations

from test_layers import _imports, _modules


def _graph() -> dict[str, set[str]]:
    modules = set(_modules())
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module in modules:
        for name, _ in _imports(module):
            # `import flowkit` from inside the package is the public API, not a circle
            if name in modules and name != module and name != "flowkit":
                graph[module].add(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
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
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_between_modules() -> None:
    assert _cycles(_graph()) == []


def test_the_check_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
