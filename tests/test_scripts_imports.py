"""scripts/ is a package imported from the repository root: its files import each other as ``scripts.experiments.lib``,
``scripts.bench.machine``... and fairseq_plugins as installed, never through a ``sys.path`` entry of their own.
Read with ``ast`` (nothing is imported): no ``sys.path`` change, no bare ``import lib`` of a sibling script, no
relative import; every folder of Python files is a package that the install includes."""
import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

# (file relative to the root, what it does) -> why it is allowed.  A sys.path change is named "sys.path".
ALLOWED = {
    ("scripts/bench/peers/onmt_decode.py", "onmt"): "OpenNMT-py's package, not scripts/bench/peers/onmt.py: the "
                                                    "driver runs under python -P, so its folder is not on sys.path",
}


def sibling_names() -> set:
    """The names a bare import of a script module or folder would start with: every file stem and folder name of
    scripts/."""
    names = {path.stem for path in SCRIPTS.rglob("*.py") if path.stem != "__init__"}
    return names | {path.name for path in SCRIPTS.rglob("*") if path.is_dir() and path.name != "__pycache__"}


def is_sys_path(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
        and node.value.id == "sys"


def offences(source: str, siblings: set) -> list:
    """(line, what) for each change of sys.path ("sys.path"), bare import of a sibling (its first name) and
    relative import ("relative import") in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_sys_path(node.func.value) \
                and node.func.attr in ("insert", "append", "extend"):
            found.append((node.lineno, "sys.path"))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if is_sys_path(target) or isinstance(target, ast.Subscript) and is_sys_path(target.value):
                    found.append((node.lineno, "sys.path"))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names
                      if alias.name.split(".")[0] in siblings]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append((node.lineno, "relative import"))
            elif node.module.split(".")[0] in siblings:
                found.append((node.lineno, node.module.split(".")[0]))
    return sorted(found)


def test_offences_finds_path_changes_bare_and_relative_imports():
    source = ("import sys\nimport os, lib\nfrom records import x\nfrom scripts.experiments import records\n"
              "sys.path.insert(0, 'a')\nsys.path.append('b')\nsys.path[:0] = ['c']\nfrom . import y\n"
              "import fairseq_plugins.text\n# sys.path.insert(0, 'comment')\nprint('sys.path.insert')\n")
    assert offences(source, {"lib", "records"}) == [(2, "lib"), (3, "records"), (5, "sys.path"), (6, "sys.path"),
                                                    (7, "sys.path"), (8, "relative import")]


def test_the_scripts_import_from_the_root_and_leave_sys_path_alone():
    siblings = sibling_names()
    assert {"lib", "records", "machine", "peers", "experiments"} <= siblings
    found, used = [], set()
    for path in sorted(SCRIPTS.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        for line, what in offences(path.read_text(encoding="utf-8"), siblings):
            if (name, what) in ALLOWED:
                used.add((name, what))
            else:
                found.append(f"{name}:{line}: {what}")
    for path in sorted(SCRIPTS.rglob("*.sh")) + sorted(SCRIPTS.rglob("*.sbatch")):  # python -c programs
        for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "sys.path.insert" in text or "sys.path.append" in text:
                found.append(f"{path.relative_to(ROOT).as_posix()}:{line}: sys.path")
    assert found == [], "import scripts.<folder>.<module> from the root instead:\n" + "\n".join(found)
    assert used == set(ALLOWED), f"allowed but no longer there: {sorted(set(ALLOWED) - used)}"


def test_every_folder_of_scripts_is_a_package_that_the_install_includes():
    folders = {path.parent for path in SCRIPTS.rglob("*.py")}
    assert SCRIPTS in folders and [f for f in sorted(folders) if not (f / "__init__.py").is_file()] == []
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert "scripts*" in include["include"] and "fairseq_plugins*" in include["include"]
