"""The old import paths of modules that moved, kept working for one release.

``import fairseq_plugins.hub`` (now ``fairseq_plugins.inference.hub``) and the like are answered by a finder on
``sys.meta_path`` with the module at its new place, so old code and old pickles keep loading.  A module whose
command front end moved to ``fairseq_plugins/cli/`` is answered with a module holding the library's names and
the command's ``main``.  The summ-* commands themselves kept their names and options; ``python -m`` of a library
whose command moved stops with the new path (``command_moved``) rather than doing nothing.
"""
import importlib
import importlib.abc
import importlib.util
import sys
import types

# old dotted path -> (the library module now, the command module now or None)
MOVED = {
    "fairseq_plugins.hub": ("fairseq_plugins.inference.hub", None),
    "fairseq_plugins.package": ("fairseq_plugins.inference.package", "fairseq_plugins.cli.package"),
    "fairseq_plugins.quantize": ("fairseq_plugins.inference.quantize", "fairseq_plugins.cli.quantize"),
    "fairseq_plugins.checkpoint_safety": ("fairseq_plugins.runtime.checkpoint_safety", None),
    "fairseq_plugins.checkpoint_info": ("fairseq_plugins.runtime.checkpoint_info",
                                        "fairseq_plugins.cli.checkpoint_info"),
    "fairseq_plugins.training_time": ("fairseq_plugins.runtime.training_time", None),
    "fairseq_plugins.training_log": ("fairseq_plugins.runtime.training_log", "fairseq_plugins.cli.training_log"),
    "fairseq_plugins.run_config": ("fairseq_plugins.runtime.run_config", "fairseq_plugins.cli.run_config"),
    "fairseq_plugins.visualize": ("fairseq_plugins.viz.visualize", None),
    "fairseq_plugins.analysis_page": ("fairseq_plugins.viz.analysis_page", None),
    "fairseq_plugins.scoring.abstractiveness": ("fairseq_plugins.cli.analyze", None),
    "fairseq_plugins.tools.average_checkpoints": ("fairseq_plugins.runtime.average_checkpoints",
                                                  "fairseq_plugins.cli.average_checkpoints"),
    "fairseq_plugins.tools.rl_stats": ("fairseq_plugins.runtime.rl_stats", "fairseq_plugins.cli.rl_stats"),
    "fairseq_plugins.tools.attention_stats": ("fairseq_plugins.viz.attention_stats",
                                              "fairseq_plugins.cli.attention_stats"),
    "fairseq_plugins.tools.rouge_significance": ("fairseq_plugins.scoring.significance",
                                                 "fairseq_plugins.cli.rouge_significance"),
    "fairseq_plugins.tools.visualize_attention": ("fairseq_plugins.cli.visualize_attention", None),
}
OLD_PACKAGES = ("fairseq_plugins.tools",)  # packages that are gone: only their moved modules are answered


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of ``MOVED`` (or ``OLD_PACKAGES``) and loads it as described above."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED or fullname in OLD_PACKAGES:
            return importlib.util.spec_from_loader(fullname, self, is_package=fullname in OLD_PACKAGES)
        return None

    def create_module(self, spec):
        if spec.name in OLD_PACKAGES:
            return None  # an empty package: the default module, given a __path__ by the spec
        library, command = MOVED[spec.name]
        module = importlib.import_module(library)
        if command is None:
            return module
        combined = types.ModuleType(spec.name, module.__doc__)
        combined.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
        combined.main = importlib.import_module(command).main
        return combined

    def exec_module(self, module):
        if module.__spec__.name in OLD_PACKAGES:
            module.__path__ = []


def install() -> None:
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())


def command_moved(old: str, new: str) -> None:
    """``python -m OLD`` of a library whose command moved to fairseq_plugins/cli/: a usage error naming NEW."""
    print(f"python -m {old}: this command moved: run python -m {new} (same options)", file=sys.stderr)
    sys.exit(2)
