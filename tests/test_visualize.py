"""Attention visualiser and the hub's teacher forcing, on a hand-built tiny pgn_lstm (no training needed).

The forced-copy case: p_gen is forced to 0 and the attention to be uniform, so the model can only copy, and the
most frequent source token, the OOV word "zyzzyva" (read as <oov-0>), is what it writes."""
import dataclasses
import warnings
from html.parser import HTMLParser

import numpy as np
import pytest
import torch

from conftest import tiny_dictionary, tiny_model
from fairseq_plugins.inference.hub import Summarizer, teacher_force
from fairseq_plugins.text.markers import marker
from fairseq_plugins.viz import visualize
from fairseq_plugins.viz.visualize import png_layout, render_html, render_png, save

SETTINGS = {"lang": "en", "unit": "keep", "lowercase": False, "max_source_len": 0, "num_markers": 4}
COPY_DOC = "a zyzzyva b zyzzyva zyzzyva"  # source: a <oov-0> b <oov-0> <oov-0> </s>
GENERATION = dict(beam=2, max_len_b=4, min_len=4, block_ngram_repeat=0, block_immediate_repeat=0)  # a forced copy
# repeats its word


def make_summarizer(switch_bias=None, uniform_attention=False, seed=0, sharpen=1.0):
    from fairseq.tasks.translation import TranslationConfig

    from fairseq_plugins.tasks.summarization import SummarizationTask

    dictionary = tiny_dictionary()
    torch.manual_seed(seed)
    model = tiny_model(dictionary).eval()
    with torch.no_grad():
        if switch_bias is not None:  # p_gen = sigmoid(bias) whatever the inputs
            model.decoder.readout.switch.proj.weight.zero_()
            model.decoder.readout.switch.proj.bias.fill_(switch_bias)
        if uniform_attention:
            model.decoder.attention.v.weight.zero_()
        model.decoder.attention.v.weight.mul_(sharpen)  # > 1: peakier attention than a random model's
    task = SummarizationTask(TranslationConfig(), dictionary, dictionary)
    return Summarizer(model, task, SETTINGS)


@pytest.fixture(scope="module")
def copy_details():
    summarizer = make_summarizer(switch_bias=-200.0, uniform_attention=True)
    return summarizer.summarize_with_details([COPY_DOC], **GENERATION)[0]


class Page(HTMLParser):
    """Collects every element's tag, attributes and direct text, and checks that the page nests properly."""

    VOID = {"meta", "br", "img", "link", "input", "hr"}

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.elements, self.stack = [], []
        self.feed(page)
        self.close()
        assert not self.stack, f"unclosed elements: {[e['tag'] for e in self.stack]}"

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "text": "", "parents": [e["tag"] for e in self.stack],
                   "parent_ids": [e["attrs"].get("id") for e in self.stack]}
        element["classes"] = set((element["attrs"].get("class") or "").split())
        self.elements.append(element)
        if tag not in self.VOID:
            self.stack.append(element)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1]["tag"] == tag, f"</{tag}> closes {self.stack[-1]['tag']}"
        self.stack.pop()

    def handle_data(self, data):
        if self.stack:
            self.stack[-1]["text"] += data

    def spans_in(self, container_id):
        return [e for e in self.elements if e["tag"] == "span" and container_id in e["parent_ids"]]


def test_forced_copy_details(copy_details):
    d = copy_details
    assert d.source_markers == ["a", marker(0), "b", marker(0), marker(0), "</s>"]
    assert d.source_tokens == ["a", "zyzzyva", "b", "zyzzyva", "zyzzyva", "</s>"]
    assert d.source_oov == [False, True, False, True, True, False]
    assert d.summary_markers == [marker(0)] * 4 + ["</s>"]  # only copying is possible: the majority token
    assert d.summary_tokens == ["zyzzyva"] * 4 + ["</s>"]
    assert d.summary_copied_oov == [True] * 4 + [False]
    assert d.text == "zyzzyva zyzzyva zyzzyva zyzzyva"
    assert d.attention.shape == (5, 6)
    np.testing.assert_allclose(d.attention, np.full((5, 6), 1 / 6), rtol=1e-5)
    np.testing.assert_allclose(d.p_gen, np.zeros(5), atol=1e-6)
    # coverage c^t = sum of the attention before step t (eq 10): 0, 1/6, 2/6, ...
    np.testing.assert_allclose(d.coverage, np.arange(5)[:, None] / 6 * np.ones((1, 6)), rtol=1e-5, atol=1e-7)


def test_teacher_forcing_reproduces_the_beam_search_attention():
    """Teacher-forcing the generated summary gives the attention the beam search saw at each step."""
    from fairseq.sequence_generator import SequenceGenerator

    summarizer = make_summarizer(seed=3, sharpen=200.0)  # a random model, peaky attention, 0 < p_gen < 1
    model, dictionary = summarizer.model, summarizer.src_dict
    ids, _, _ = summarizer.prepare("a c zyzzyva d e b qq f")
    generator = SequenceGenerator([model], dictionary, beam_size=3, max_len_b=6, min_len=6)
    sample = {"net_input": {"src_tokens": ids.view(1, -1), "src_lengths": torch.tensor([ids.numel()])}}
    hypo = generator.generate([model], sample)[0][0]
    forced = teacher_force(model, ids, hypo["tokens"])
    assert forced["attention"].shape == (hypo["tokens"].numel(), ids.numel())
    assert forced["attention"].std() > 0.05  # far from uniform: the comparison below means something
    np.testing.assert_allclose(forced["attention"], hypo["attention"].T.numpy(), rtol=1e-4, atol=1e-6)
    assert ((forced["p_gen"] > 0) & (forced["p_gen"] < 1)).all()


def test_html_highlights_the_copied_oov_word(copy_details):
    page = Page(render_html(copy_details))
    summary = page.spans_in("summary-tokens")
    assert [s["text"] for s in summary] == copy_details.summary_tokens
    copied = [s for s in summary if "copied-oov" in s["classes"]]
    assert [s["text"] for s in copied] == ["zyzzyva"] * 4  # shown as the restored word...
    assert all(s["attrs"]["data-marker"] == marker(0) for s in copied)  # ...that came from <oov-0>
    assert all("copy" in s["classes"] and float(s["attrs"]["data-p-gen"]) < 1e-3 for s in copied)
    assert "copied-oov" not in summary[-1]["classes"] and "special" in summary[-1]["classes"]  # </s>
    source = page.spans_in("source-tokens")
    assert [s["text"] for s in source] == copy_details.source_tokens
    assert [("oov" in s["classes"], "copied" in s["classes"]) for s in source] == (
        [(False, False), (True, True), (False, False), (True, True), (True, True), (False, False)])
    # the heat map table: a row per summary token (copied rows marked), a cell per source token + p_gen + overlap
    rows = [e for e in page.elements if e["tag"] == "tr" and "tbody" in e["parents"]]
    assert len(rows) == 5
    row_heads = [e for e in page.elements if e["tag"] == "th" and "tbody" in e["parents"]]
    assert [("copied-oov" in h["classes"], h["text"]) for h in row_heads] == (
        [(True, "zyzzyva")] * 4 + [(False, "</s>")])
    cells = [e for e in page.elements if e["tag"] == "td"]
    assert len(cells) == 5 * (6 + 2)
    heat_cells = [c for c in cells if "num" not in c["classes"]]
    assert {c["attrs"]["title"] for c in heat_cells} == {f"{1 / 6:.3f}"}
    assert [c["text"] for c in cells if "pgen" in c["classes"]] == ["0.00"] * 5


def test_html_marks_generated_tokens_when_p_gen_is_one():
    details = make_summarizer(switch_bias=200.0).summarize_with_details([COPY_DOC], **GENERATION)[0]
    summary = Page(render_html(details)).spans_in("summary-tokens")
    assert all("gen" in s["classes"] and float(s["attrs"]["data-p-gen"]) > 0.999 for s in summary)
    assert not any("copied-oov" in s["classes"] for s in summary)  # p_gen = 1: a marker cannot come out


def test_html_escapes_the_text():
    hostile = 'a <script>alert(1)</script> b x"onmouseover="alert(2) c <b>&amp;'
    summarizer = make_summarizer(switch_bias=-200.0, uniform_attention=True)
    details = summarizer.summarize_with_details([hostile], **GENERATION)[0]
    title = "doc </title><script>alert(3)</script>"
    page_text = render_html(details, title=title)
    assert "<script" not in page_text.lower()  # nothing executable, not even our own
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page_text
    assert 'x"onmouseover' not in page_text and "x&quot;onmouseover" in page_text
    page = Page(page_text)
    assert {e["tag"] for e in page.elements} <= {"html", "head", "meta", "title", "style", "body", "header", "h1",
                                                  "h2", "p", "section", "div", "span", "table", "thead", "tbody",
                                                  "tr", "th", "td", "sub", "sup"}
    assert not any(name.startswith("on") for e in page.elements for name in e["attrs"])
    # every token comes back verbatim as the text of its own element: nothing was interpreted as markup
    assert [s["text"] for s in page.spans_in("source-tokens")] == details.source_tokens
    assert "<script>alert(1)</script>" in details.source_tokens
    assert [e["text"] for e in page.elements if e["tag"] == "title"] == [title]
    # self-contained: no external resource of any kind
    assert not any(name in ("src", "href") for e in page.elements for name in e["attrs"])
    assert "url(" not in page_text and "@import" not in page_text


def test_png_is_an_image_of_the_expected_size(copy_details, tmp_path):
    import matplotlib.image

    path = tmp_path / "attention.png"
    layout = render_png(copy_details, path)
    # 6 source x 5 summary tokens, p_gen and coverage panels: see png_layout's formula
    assert (layout["width"], layout["height"]) == (150 + 240 + 2 * (20 + 110) + 20, 40 + 120 + 80 + 20 + 90 + 50)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(path)
    assert image.shape[:2] == (layout["height"], layout["width"])
    # uniform attention = the maximum everywhere: the heat map's centre has the colour map's darkest blue
    centre = image[40 + 120 + 40, 150 + 120, :3]
    np.testing.assert_allclose(centre, [8 / 255, 48 / 255, 107 / 255], atol=0.02)
    # p_gen = 0: the p_gen panel holds no bar (white where a bar would start), unlike a p_gen = 1 model
    row0 = 40 + 120 + 8
    bar_x = 150 + 240 + 20 + 30
    assert image[row0, bar_x, :3].min() > 0.95
    generated = make_summarizer(switch_bias=200.0).summarize_with_details([COPY_DOC], **GENERATION)[0]
    render_png(generated, tmp_path / "generated.png")
    assert matplotlib.image.imread(tmp_path / "generated.png")[row0, bar_x, :3].min() < 0.8


def test_png_layout_scales_long_documents():
    small = png_layout(1, 1, has_p_gen=False, has_coverage=False)
    assert (small["width"], small["height"]) == (150 + 240 + 20, 40 + 120 + 64 + 50)
    long = png_layout(3000, 100, has_p_gen=True, has_coverage=False)
    assert long["cell_width"] == 2 and long["heat_width"] == 6000 and long["side_panels"] == 1
    assert long["height"] == 40 + 120 + 100 * 16 + 50


def test_save_writes_both_files(copy_details, tmp_path):
    layout = save(copy_details, html_path=tmp_path / "a.html", png_path=tmp_path / "a.png", title="doc 1")
    assert (tmp_path / "a.png").stat().st_size > 1000 and layout["width"] > 0
    assert "<title>doc 1</title>" in (tmp_path / "a.html").read_text(encoding="utf-8")


def chinese(details):
    """The same details with Chinese source and summary tokens (one character each)."""
    characters = "摘要模型复制源词覆盖注意力生成"
    return dataclasses.replace(
        details, source_tokens=list(characters[: len(details.source_tokens)]),
        summary_tokens=list(characters[-len(details.summary_tokens):]))


def glyph_warnings(render):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        render()
    return caught, [w for w in caught if "missing from font" in str(w.message)]


def test_png_draws_chinese_with_a_cjk_font(copy_details, tmp_path):
    if visualize.cjk_font() is None:
        pytest.skip("no CJK font on this machine: scripts/setup.sh installs fonts-wqy-microhei when run as root")
    _, missing = glyph_warnings(lambda: render_png(chinese(copy_details), tmp_path / "zh.png", title="中文摘要"))
    assert not missing, [str(w.message) for w in missing]
    assert visualize.font_families(["摘要"])[1] == visualize.cjk_font()
    assert visualize.font_families(["summary"]) == ["DejaVu Sans"]  # no CJK text: no CJK font needed


def test_png_without_a_cjk_font_says_which_package_to_install(monkeypatch, copy_details, tmp_path):
    monkeypatch.setattr(visualize, "cjk_font", lambda: None)
    caught, missing = glyph_warnings(lambda: render_png(chinese(copy_details), tmp_path / "zh.png"))
    assert missing  # matplotlib itself reports the boxes...
    assert any("fonts-wqy-microhei" in str(w.message) for w in caught)  # ...and we say what to install
    assert (tmp_path / "zh.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the PNG is still written


# ---------------------------------------------------------------------------------------------- the page's view
def test_the_page_outlines_only_what_the_copy_distribution_produced():
    """p_gen = 0 (copy only): every summary token is copied, and the source positions of its word are outlined;
    p_gen = 1 (generate only): nothing is outlined, even where a generated word also occurs in the source."""
    from fairseq_plugins.serve.page import copied_steps, copy_view

    copier = make_summarizer(switch_bias=-30.0, uniform_attention=True)
    details = copier.summarize_with_details([COPY_DOC], **GENERATION)[0]
    words = [t for t in details.summary_markers if t != "</s>"]
    assert words and set(words) == {marker(0)}  # the most frequent source token, copied
    assert copied_steps(details) == [t for t, token in enumerate(details.summary_markers) if token != "</s>"]
    assert copy_view(details)["copied"] == [token == marker(0) for token in details.source_markers]
    generator = make_summarizer(switch_bias=30.0)
    details = generator.summarize_with_details(["a b c d e f g a b"], **GENERATION)[0]
    assert set(details.summary_tokens) & {"a", "b", "c"}  # it writes words of the source, but does not copy them
    assert copied_steps(details) == [] and not any(copy_view(details)["copied"])


def test_a_summary_word_is_copied_when_its_copy_part_is_over_half_its_probability():
    from fairseq_plugins.inference.hub import SummaryDetails
    from fairseq_plugins.serve.page import copied_steps

    details = SummaryDetails(
        text="the cat", source_tokens=["the", "cat", "sat", "</s>"], source_oov=[False] * 4,
        summary_tokens=["the", "cat", "</s>"], summary_copied_oov=[False] * 3,
        attention=np.array([[0.2, 0.5, 0.3, 0.0], [0.1, 0.8, 0.1, 0.0], [0.0, 0.0, 0.0, 1.0]]),
        p_gen=np.array([0.9, 0.1, 0.5]), coverage=None, positional_scores=np.log([0.5, 0.6, 0.9]), score=-0.5)
    # "the": copy part 0.1 * 0.2 = 0.02 of P 0.5; "cat": 0.9 * 0.8 = 0.72 of P 0.6 (the rest of P is rounding here)
    assert copied_steps(details) == [1]
