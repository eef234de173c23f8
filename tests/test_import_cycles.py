"""No import cycle in the package or among the experiment scripts: every ``import`` and ``from ... import`` of
each module (those inside functions too, read with ``ast``), followed from module to module."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_names():
    """name -> file: fairseq_plugins' modules by their dotted names; scripts/experiments' by file name, as they
    import each other (from a sys.path entry)."""
    names = {}
    for path in (ROOT / "fairseq_plugins").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for path in (ROOT / "scripts" / "experiments").glob("*.py"):
        names[path.stem] = path
    return names


def imported(path: Path, names) -> set:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found & set(names)


def cycles(edges) -> list:
    """Every cycle, once, as the list of its modules starting at its smallest name."""
    found = set()

    def walk(path):
        for target in edges[path[-1]]:
            if target == path[0]:
                found.add(tuple(path))
            elif target not in path and target > path[0]:
                walk(path + [target])

    for start in edges:
        walk([start])
    return sorted(found)


def test_cycles_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [("a", "b", "c")]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_and_the_experiment_scripts_import_no_cycle():
    names = module_names()
    edges = {name: imported(path, names) - {name} for name, path in names.items()}
    assert len(edges) > 50 and edges["fairseq_plugins.analysis_page"]  # the walk sees the imports
    assert cycles(edges) == []
