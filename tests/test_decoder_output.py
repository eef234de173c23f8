"""The decoders' second output against its declaration (fairseq_plugins/modules/decoder_output.py): the keys each
model writes, their shapes, and every key the package reads from ``extra``."""
import ast
from pathlib import Path

import pytest

from conftest import tiny_batch, tiny_dca, tiny_dictionary, tiny_gru, tiny_model
from fairseq_plugins.modules.decoder_output import KEYS, dimensions

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fairseq_plugins"

MODELS = {
    "pgn_lstm": lambda d: tiny_model(d),
    "pgn_lstm_no_copy_no_coverage": lambda d: tiny_model(d, no_copy=True, no_coverage=True),
    "pgn_lstm_paulus": lambda d: tiny_model(d, arch="pgn_lstm_paulus2017", decoder_readout="paulus",
                                           intra_temporal_attention=True, intra_decoder_attention=True,
                                           no_coverage_attention=True),
    "global_gate_gru": lambda d: tiny_gru(d),
    "global_gate_gru_copy": lambda d: tiny_gru(d, copy=True),
    "dca_lstm": lambda d: tiny_dca(d),
}


def sizes(model, extra, src_tokens, prev):
    agents = extra["agent_attn"].size(2) if "agent_attn" in extra else None
    agent_len = extra["word_attn"].size(3) if "word_attn" in extra else None
    return {"B": src_tokens.size(0), "T": prev.size(1), "S": src_tokens.size(1), "1": 1, "M": agents,
            "S_a": agent_len, "H": model.decoder.hidden_size}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_key_a_model_writes_is_declared_with_its_shape(name):
    dictionary = tiny_dictionary("a b c d e f g .")  # "." (id 11) splits dca_lstm's agents
    model = MODELS[name](dictionary)
    src_tokens, src_lengths, prev = tiny_batch(dictionary)
    _, extra = model(src_tokens, src_lengths, prev)
    assert set(extra) <= set(KEYS), set(extra) - set(KEYS)
    assert {"attn", "decoder_states"} <= set(extra)
    known = sizes(model, extra, src_tokens, prev)
    for key, value in extra.items():
        declared = KEYS[key]
        if declared.shape.startswith("["):
            assert isinstance(value, list) and len(value) == 1, key
            value = value[0]
        assert tuple(value.shape) == tuple(known[d] for d in dimensions(declared.shape)), (key, tuple(value.shape))
        assert any(name.startswith(Path(w).stem) for w in declared.writers), (key, name)


def extra_keys(path: Path) -> set:
    """The string keys a module reads or writes on a dict named ``extra``: extra["k"], extra.get("k"),
    "k" in extra, extra = {"k": ...}."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "extra":
            found |= {node.slice.value} if isinstance(node.slice, ast.Constant) else set()
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "extra" and node.args
              and isinstance(node.args[0], ast.Constant)):
            found.add(node.args[0].value)
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and any(
                isinstance(c, ast.Name) and c.id == "extra" for c in node.comparators):
            found.add(node.left.value)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                isinstance(t, ast.Name) and t.id == "extra" for t in node.targets):
            found |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return {key for key in found if isinstance(key, str)}


def test_extra_keys_finds_reads_and_writes():
    source = 'extra = {"a": 1}\nextra["b"] = 2\nx = extra.get("c")\nif "d" in extra: pass\nother["e"] = 3\n'
    path = Path(__file__).with_name("_extra_keys_probe.py")
    try:
        path.write_text(source, encoding="utf-8")
        assert extra_keys(path) == {"a", "b", "c", "d"}
    finally:
        path.unlink()


def test_every_key_the_package_uses_on_extra_is_declared():
    used = {key: path for path in PACKAGE.rglob("*.py") for key in extra_keys(path)}
    assert set(used) <= set(KEYS), {key: str(used[key]) for key in set(used) - set(KEYS)}


@pytest.mark.parametrize("key", sorted(KEYS))
def test_each_declared_writer_and_reader_names_its_key(key):
    """The table stays true: every module it names as a writer or reader of KEY has the key's literal."""
    for module in KEYS[key].writers + KEYS[key].readers:
        assert f'"{key}"' in (PACKAGE / module).read_text(encoding="utf-8"), (key, module)
