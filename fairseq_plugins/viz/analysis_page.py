"""Pictures of ``summ-analyze``'s figures (:mod:`fairseq_plugins.scoring.summary_stats`): a bar chart and a page.

``render_png(results, path)``
    See et al. (2017)'s Figure 6 for the given systems: grouped bars of novel 1-, 2-, 3- and 4-grams and of
    copied sentences (pooled over the corpus, percent), one colour per system (the reference included), each
    bar labelled with its value.  Unlike See et al., who plot the share of *novel* sentences, the last group
    is the share of *copied* sentences, as the command reports it; a dashed line separates the two kinds.
``render_html(sources, systems, lang)``
    One self-contained page (inline CSS, no scripts, no external resources; every text escaped), one section
    per document, paged with links (previous / next / an index; the page shows the document named in the
    address, ``#doc-K``, and the first one otherwise).  Per document: its figures (a row per system); each
    summary, one sentence a line, its copied fragments (Grusky et al.'s fragments of at least
    ``min_fragment`` tokens, default 3, so that single shared words such as "the" do not light up everything)
    shaded in the system's colour and its copied sentences marked; the source, each token underlined in the
    colour of every system that copied it (one stripe per system).  The reference, when given, is one more
    system.  Tokens are shown as the figures count them (``--lower`` lower-cases them; Chinese: characters).
"""
import html
from typing import Dict, List, Optional, Sequence

from fairseq_plugins.scoring import summary_stats as ab

# one colour per system, in order (matplotlib's tab10, without its grey, which is kept for the reference)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
REFERENCE_COLOUR = "#555555"
GROUPS = (*(f"novel_{n}grams" for n in range(1, ab.MAX_N + 1)), "copied_sentences")
GROUP_LABELS = ("1-grams", "2-grams", "3-grams", "4-grams", "sentences")
MIN_FRAGMENT = 3
STRIPE = 3  # pixels of a system's stripe under a copied source token
PAGE_FIGURES = ("novel_1grams", "novel_2grams", "novel_3grams", "novel_4grams", "copied_sentences", "coverage",
                "density", "compression", "repeated_trigrams", "tokens")


def colours(names: Sequence[str]) -> Dict[str, str]:
    """System name -> colour: the palette in order, the reference grey."""
    out, others = {}, iter(PALETTE * (len(names) // len(PALETTE) + 1))
    for name in names:
        out[name] = REFERENCE_COLOUR if name == ab.REFERENCE else next(others)
    return out


# ---------------------------------------------------------------------------------------------- the bar chart
def render_png(results: Dict, path, title: Optional[str] = None, dpi: int = 100) -> None:
    """Draw the grouped bars (see the module docstring) into a PNG."""
    import matplotlib
    from fairseq_plugins.viz.visualize import font_families

    with matplotlib.rc_context({"font.family": font_families([*results, title or ""])}):
        _draw_png(results, path, title, dpi)


def _draw_png(results: Dict, path, title: Optional[str], dpi: int) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = list(results)
    colour = colours(names)
    width = 0.8 / max(len(names), 1)
    fig = Figure(figsize=(2.0 + 1.4 * len(GROUPS) * max(1, len(names) / 3), 4.8), dpi=dpi)
    FigureCanvasAgg(fig)
    axes = fig.add_subplot(1, 1, 1)
    for k, name in enumerate(names):
        values = [results[name][key]["pooled"] or 0.0 for key in GROUPS]
        xs = [g - 0.4 + width * (k + 0.5) for g in range(len(GROUPS))]
        bars = axes.bar(xs, values, width * 0.92, color=colour[name], label=name)
        axes.bar_label(bars, labels=[f"{v:.1f}" for v in values], fontsize=7, padding=1)
    axes.axvline(len(GROUPS) - 1.5, color="#999999", linestyle="--", linewidth=1)
    axes.set_xticks(range(len(GROUPS)), GROUP_LABELS)
    axes.text(1.5, -0.14, "novel n-grams (not in the source)", transform=axes.get_xaxis_transform(),
              ha="center", va="top")
    axes.text(len(GROUPS) - 1, -0.14, "copied sentences", transform=axes.get_xaxis_transform(),
              ha="center", va="top")
    axes.set_ylabel("% of the summaries' units (pooled)")
    axes.set_ylim(0, 105)
    axes.spines[["top", "right"]].set_visible(False)
    axes.legend(frameon=False, loc="upper left", ncol=min(len(names), 4))
    axes.set_title(title or "Novel n-grams and copied sentences", fontsize=11)
    fig.subplots_adjust(bottom=0.2, top=0.9, left=0.08, right=0.98)
    fig.savefig(path, dpi=dpi)


# ---------------------------------------------------------------------------------------------- the page
CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; color: #222; line-height: 1.5; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.2em; } h3 { font-size: 1em; margin: .8em 0 .2em; }
.doc { display: none; border-top: 2px solid #ccc; padding-top: .5em; }
.doc:target { display: block; }
body:not(:has(.doc:target)) #doc-1 { display: block; }
nav.pager { display: flex; gap: 1.5em; align-items: baseline; }
nav.index { font-size: .85em; max-height: 6em; overflow-y: auto; }
nav.index a { margin-right: .6em; }
table { border-collapse: collapse; font-size: .9em; }
td, th { padding: .15em .6em; text-align: right; border-bottom: 1px solid #e5e5e5; }
td:first-child, th:first-child { text-align: left; }
.swatch { display: inline-block; width: .9em; height: .9em; vertical-align: middle; margin-right: .3em; }
.summary { margin: .2em 0 .6em; padding-left: .6em; border-left: 4px solid var(--c); }
.sent { margin: .1em 0; }
.badge { font-size: .75em; color: #fff; background: var(--c); border-radius: .3em; padding: 0 .3em; }
.frag { background: var(--bg); border-radius: .2em; }
.source { font-size: .95em; line-height: 2.3; }
.src { padding-bottom: var(--pad); }
.meta, .legend { color: #555; font-size: .9em; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _tint(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha:.2f})"


def _joiner(lang: str) -> str:
    return "" if lang == "zh" else " "


def _document(k: int, n_docs: int, source: str, summaries: Dict[str, str], colour: Dict[str, str], lang: str,
              lower: bool, min_fragment: int) -> List[str]:
    """One document's section."""
    article = ab.tokens(source, lang, lower)
    copied_by: List[List[str]] = [[] for _ in article]  # per source token: the systems that copied it
    nav = [f'<a href="#doc-{k - 1}">&laquo; previous</a>' if k > 1 else "<span></span>",
           f"<strong>document {k} of {n_docs}</strong>",
           f'<a href="#doc-{k + 1}">next &raquo;</a>' if k < n_docs else "<span></span>"]
    parts = [f'<section class="doc" id="doc-{k}">', f'<nav class="pager">{"".join(nav)}</nav>',
             "<h2>Figures</h2>", _figure_table(source, summaries, colour, lang, lower), "<h2>Summaries</h2>"]
    for index, (name, text) in enumerate(summaries.items()):
        sentences = ab.sentence_tokens(text, lang, lower)
        units = [tok for s in sentences for tok in s]
        marked = [False] * len(units)
        for frag in ab.fragments(article, units):
            if frag.length >= min_fragment:
                for t in range(frag.length):
                    marked[frag.summary_start + t] = True
                    copied_by[frag.source_start + t].append(name)
        style = f"--c:{colour[name]};--bg:{_tint(colour[name], 0.28)}"
        parts.append(f'<div class="summary" style="{style}"><h3>{_e(name)}</h3>')
        if not units:
            parts.append('<p class="meta">(empty summary)</p>')
        position = 0
        for sentence, copied in zip(sentences, ab.copied_flags(sentences, article)):
            spans = _spans(sentence, marked[position:position + len(sentence)], f"frag s{index}", lang)
            badge = ' <span class="badge">copied sentence</span>' if copied else ""
            parts.append(f'<div class="sent">{spans}{badge}</div>')
            position += len(sentence)
        parts.append("</div>")
    parts.append("<h2>Source</h2>")
    parts.append(f'<p class="legend">{len(article)} tokens; a stripe under a token for each system whose summary '
                 f"copied it in a fragment of at least {min_fragment} tokens.</p>")
    parts.append(f'<p class="source" style="--pad:{STRIPE * len(colour)}px">'
                 f"{_source_tokens(article, copied_by, colour, lang)}</p>")
    parts.append("</section>")
    return parts


def _spans(tokens: Sequence[str], marked: Sequence[bool], css_class: str, lang: str) -> str:
    """Tokens with each run of marked ones in one ``<span class=css_class>``."""
    out, run = [], []
    for tok, is_marked in zip(tokens, marked):
        if is_marked:
            run.append(tok)
            continue
        if run:
            out.append(f'<span class="{css_class}">{_e(_joiner(lang).join(run))}</span>')
            run = []
        out.append(_e(tok))
    if run:
        out.append(f'<span class="{css_class}">{_e(_joiner(lang).join(run))}</span>')
    return _joiner(lang).join(out)


def _source_tokens(article: Sequence[str], copied_by: Sequence[Sequence[str]], colour: Dict[str, str],
                   lang: str) -> str:
    """Source tokens; one 3-pixel stripe under a token per system that copied it, each system at its own height
    (its place in ``colour``), so a system's stripes line up along the text."""
    slot = {name: k for k, name in enumerate(colour)}
    out = []
    for tok, names in zip(article, copied_by):
        if not names:
            out.append(_e(tok))
            continue
        names = sorted(set(names), key=slot.get)
        stripes = ", ".join(f"linear-gradient({colour[n]},{colour[n]}) left 0 bottom {STRIPE * slot[n]}px / 100% "
                            f"{STRIPE}px no-repeat" for n in names)
        out.append(f'<span class="src" style="background:{stripes}" title="copied by {_e(", ".join(names))}">'
                   f"{_e(tok)}</span>")
    return _joiner(lang).join(out)


def _figure_table(source: str, summaries: Dict[str, str], colour: Dict[str, str], lang: str, lower: bool) -> str:
    labels = {fig.key: fig.label for fig in ab.FIGURES}
    rows = ["<table><tr><th>system</th>" + "".join(f"<th>{_e(labels[key])}</th>" for key in PAGE_FIGURES)
            + "</tr>"]
    for name, text in summaries.items():
        values = ab.aggregate([ab.document_counts(source, text, lang, lower)])
        cells = "".join(f"<td>{_value(values[key]['pooled'], key)}</td>" for key in PAGE_FIGURES)
        rows.append(f'<tr><td><span class="swatch" style="background:{colour[name]}"></span>{_e(name)}</td>'
                    f"{cells}</tr>")
    return "".join(rows) + "</table>"


def _value(value: Optional[float], key: str) -> str:
    return "&ndash;" if value is None else f"{value:.2f}" if key == "coverage" else f"{value:.1f}"


def render_html(sources: Sequence[str], systems: Dict[str, Sequence[str]], lang: str = "en", lower: bool = False,
                min_fragment: int = MIN_FRAGMENT, title: str = "summ-analyze: copied fragments") -> str:
    """The self-contained page (a string); see the module docstring."""
    colour = colours(list(systems))
    n_docs = len(sources)
    legend = " &middot; ".join(f'<span class="swatch" style="background:{c}"></span>{_e(n)}'
                               for n, c in colour.items())
    index = "".join(f'<a href="#doc-{k}">{k}</a>' for k in range(1, n_docs + 1))
    parts = ["<!DOCTYPE html>", f'<html lang="{_e(lang)}">',
             '<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(title)}</title>", f"<style>{CSS}</style></head>", "<body>",
             f"<header><h1>{_e(title)}</h1>",
             f'<p class="meta">{n_docs} documents. Systems: {legend}. Figures per document (percent for shares; '
             "coverage 0-1; a dash where the summary has no such unit); definitions: <code>summ-analyze "
             "--help</code>. Shaded in a summary: its copied fragments (at least "
             f"{min_fragment} tokens).</p>",
             f'<nav class="index">Documents: {index}</nav></header>']
    for k, source in enumerate(sources, 1):
        summaries = {name: texts[k - 1] for name, texts in systems.items()}
        parts += _document(k, n_docs, source, summaries, colour, lang, lower, min_fragment)
    parts.append("</body></html>\n")
    return "\n".join(parts)
