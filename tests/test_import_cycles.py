"""No import cycle in the package or among the experiment scripts: every ``import`` and ``from ... import`` of
each module (those inside functions too, read with ``ast``), followed from module to module."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_names():
    """name -> file: the modules of fairseq_plugins and of scripts (scripts.experiments.lib...) by their dotted
    names from the repository root, as they import each other."""
    names = {}
    for package in ("fairseq_plugins", "scripts"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imported(path: Path, names) -> set:
    """The modules of ``names`` that the file imports, relative imports resolved against its package."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return found & set(names)


LAYERS = {  # a package -> the packages of fairseq_plugins it must not import (the arrows that would run up)
    "accelerated": ("models", "modules", "criterions", "tasks", "generation", "cli", "inference", "serve", "viz",
                    "runtime", "text", "scoring"),
    "modules": ("models", "criterions", "tasks", "generation", "cli", "inference", "serve", "viz"),
    "text": ("models", "modules", "criterions", "tasks", "generation", "cli", "inference", "serve", "viz",
             "runtime"),
    "scoring": ("models", "criterions", "cli", "inference", "serve", "viz"),
    "models": ("criterions", "cli", "inference", "serve", "viz"),
    "criterions": ("cli", "inference", "serve", "viz"),
    "generation": ("cli", "inference", "serve", "viz"),
    "tasks": ("cli", "inference", "serve", "viz"),
    "runtime": ("criterions", "cli", "serve", "viz"),
    "inference": ("criterions", "cli", "serve", "viz"),
    "viz": ("criterions", "cli", "serve"),
    "serve": ("criterions", "cli"),
}


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
    assert len(edges) > 50 and edges["fairseq_plugins.viz.analysis_page"]  # the walk sees the imports
    assert "scripts.experiments.lib" in edges["scripts.experiments.records"]  # the scripts' imports too
    assert cycles(edges) == []


def upward_arrows(edges) -> list:
    """(importer, imported) for each import that runs against ``LAYERS``, and each model importing another model."""
    found = []
    for name, targets in edges.items():
        parts = name.split(".")
        if parts[0] != "fairseq_plugins" or len(parts) < 3:
            continue
        for target in targets:
            tparts = target.split(".")
            if len(tparts) < 2 or tparts[0] != "fairseq_plugins":
                continue
            if tparts[1] in LAYERS.get(parts[1], ()):
                found.append((name, target))
            elif parts[1] == tparts[1] == "models" and len(tparts) > 2 and tparts[2] != parts[2]:
                found.append((name, target))
    return sorted(found)


def test_upward_arrows_finds_a_library_importing_a_command():
    edges = {"fairseq_plugins.text.prepare": {"fairseq_plugins.cli.prepare"},
             "fairseq_plugins.models.a": {"fairseq_plugins.models.b", "fairseq_plugins.modules.x"},
             "fairseq_plugins.cli.prepare": {"fairseq_plugins.text.prepare"}}
    assert upward_arrows(edges) == [("fairseq_plugins.models.a", "fairseq_plugins.models.b"),
                                    ("fairseq_plugins.text.prepare", "fairseq_plugins.cli.prepare")]


def test_no_import_runs_up_the_package():
    """Libraries never import the command front ends (fairseq_plugins/cli/), blocks never import models, no model
    imports another, and so on down ``LAYERS``."""
    names = module_names()
    edges = {name: imported(path, names) - {name} for name, path in names.items()}
    assert edges["fairseq_plugins.cli.prepare"] >= {"fairseq_plugins.text.prepare"}  # relative imports resolved too
    assert upward_arrows(edges) == []
