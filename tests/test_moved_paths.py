"""The old import paths of the modules that moved (fairseq_plugins/moved.py) still import, with the library's
names and, where the module was also a command, the command's ``main``; the command front ends run with -m."""
import importlib
import re
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT))
from fairseq_plugins.moved import MOVED  # noqa: E402


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_module_at_its_new_place(old):
    library, command = MOVED[old]
    module, new = importlib.import_module(old), importlib.import_module(library)
    public = [name for name in vars(new) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(new, name) for name in public)
    if command:
        assert module.main is importlib.import_module(command).main


def test_a_path_that_never_existed_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("fairseq_plugins.tools.no_such_tool")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("fairseq_plugins.no_such_module")


@pytest.mark.parametrize("command", ["training_log", "checkpoint_info", "quantize", "package"])
def test_the_commands_the_shell_scripts_run_with_dash_m_answer_help(command):
    result = subprocess.run([sys.executable, "-m", f"fairseq_plugins.cli.{command}", "--help"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("usage:"), result.stderr[-500:]


def test_run_config_without_a_subcommand_shows_its_usage():
    result = subprocess.run([sys.executable, "-m", "fairseq_plugins.cli.run_config"], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 2 and "python -m fairseq_plugins.cli.run_config get FILE KEY" in result.stderr


OLD_DASH_M = ["fairseq_plugins.text.convert", "fairseq_plugins.text.prepare", "fairseq_plugins.text.restore",
              "fairseq_plugins.scoring.rouge155", "fairseq_plugins.scoring.files2rouge",
              "fairseq_plugins.scoring.significance", "fairseq_plugins.serve.app", "fairseq_plugins.inference.package",
              "fairseq_plugins.inference.quantize", "fairseq_plugins.runtime.checkpoint_info",
              "fairseq_plugins.runtime.training_log", "fairseq_plugins.runtime.average_checkpoints",
              "fairseq_plugins.runtime.rl_stats", "fairseq_plugins.viz.attention_stats"]


@pytest.mark.parametrize("module", OLD_DASH_M)
def test_a_library_run_with_dash_m_names_where_its_command_moved(module):
    """``python -m`` of a library whose command moved to cli/ is a usage error naming the new path (never a silent
    exit 0), and the new path runs."""
    result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True)
    new = re.search(r"run python -m (fairseq_plugins\.cli\.\w+)", result.stderr)
    assert result.returncode == 2 and new, (module, result.stderr[-500:])
    moved = subprocess.run([sys.executable, "-m", new.group(1), "--help"], cwd=ROOT, capture_output=True, text=True)
    assert moved.returncode in (0, 2) and "usage" in (moved.stdout + moved.stderr).lower(), new.group(1)
