"""Attention visualiser: what the pointer-generator looked at, copied and covered while writing a summary.

Input: a :class:`fairseq_plugins.inference.hub.SummaryDetails` (``Summarizer.summarize_with_details``).  Two renderings:

``render_html(details)``
    A self-contained page (inline CSS, no scripts, no external resources; every piece of text escaped):
      * the summary, each token coloured by p_gen (blue: generated from the vocabulary, orange: copied from the
        source); tokens produced from an ``<oov-K>`` marker (copied OOV words, shown as their restored word)
        carry the class ``copied-oov``;
      * the source, each token shaded by the attention it received over the whole summary (the final coverage);
        OOV words carry the class ``oov``, and ``copied`` as well when the summary copied them;
      * the attention heat map as a table: one row per summary token, one column per source token, a cell's
        opacity = a_i^t relative to the largest attention on the page (its value in the cell's tooltip); the
        last columns give p_gen and the coverage overlap sum_i min(a_i^t, c_i^t) (the coverage loss of the
        step, See eq 12) when the model has them.
``render_png(details, path)``
    The same heat map drawn with matplotlib (Agg canvas, no display needed): source tokens along the top,
    summary tokens down the left (copied OOV words and source OOV words in orange, bold), p_gen bars and
    coverage-overlap bars to the right of each row, and the final coverage of each source token below.
    Its size in pixels is ``png_layout(...)["width"] x ["height"]`` (see there), independent of the text.
"""
import functools
import html
import warnings
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

# ---------------------------------------------------------------------------------------------- colours
GENERATE_RGB = (49, 114, 186)  # p_gen = 1
COPY_RGB = (230, 120, 20)  # p_gen = 0
ATTENTION_RGB = (31, 119, 180)
COVERAGE_RGB = (214, 90, 20)
OOV_COLOUR = "#d2640a"

# ---------------------------------------------------------------------------------------------- PNG layout (pixels)
PNG_DPI = 100
MAX_CELL = 16  # a heat-map cell is at most 16 x 16 pixels...
MIN_CELL = 2  # ...and at least 2; labels are drawn when a cell is at least LABEL_CELL pixels
LABEL_CELL = 9
MAX_HEAT_WIDTH = 6000  # the heat map shrinks its cells to stay within these sizes
MAX_HEAT_HEIGHT = 3000
MIN_HEAT_WIDTH = 240
MIN_HEAT_HEIGHT = 64
LEFT = 150  # summary-token labels
RIGHT = 20
TOP = 40  # title
SOURCE_LABELS = 120  # source-token labels above the heat map
BOTTOM = 50  # x-axis labels of the side panels
GAP = 20
SIDE_PANEL = 110  # each bar panel right of the heat map (p_gen, coverage overlap)
COVERAGE_PANEL = 90  # final-coverage bars below the heat map


def _cell(count: int, max_total: int) -> int:
    return max(MIN_CELL, min(MAX_CELL, max_total // max(count, 1)))


def png_layout(n_source: int, n_summary: int, has_p_gen: bool, has_coverage: bool) -> Dict[str, int]:
    """Pixel geometry of the PNG.

    cell width  = clamp(6000 // n_source, 2, 16), cell height = clamp(3000 // n_summary, 2, 16)
    heat map    = max(240, n_source * cell width) x max(64, n_summary * cell height)
    width  = 150 + heat width + (20 + 110) per side panel (p_gen if any, coverage overlap if coverage) + 20
    height = 40 + 120 + heat height + (20 + 90 if coverage) + 50
    """
    cell_w, cell_h = _cell(n_source, MAX_HEAT_WIDTH), _cell(n_summary, MAX_HEAT_HEIGHT)
    heat_w = max(MIN_HEAT_WIDTH, n_source * cell_w)
    heat_h = max(MIN_HEAT_HEIGHT, n_summary * cell_h)
    n_side = int(has_p_gen) + int(has_coverage)
    width = LEFT + heat_w + n_side * (GAP + SIDE_PANEL) + RIGHT
    height = TOP + SOURCE_LABELS + heat_h + ((GAP + COVERAGE_PANEL) if has_coverage else 0) + BOTTOM
    return {"width": width, "height": height, "heat_width": heat_w, "heat_height": heat_h,
            "cell_width": cell_w, "cell_height": cell_h, "side_panels": n_side}


def coverage_overlap(details) -> Optional[np.ndarray]:
    """Per summary token, sum_i min(a_i^t, c_i^t): how much step t attends to what was already attended
    (the coverage loss of the step, See eq 12).  None for a model without coverage."""
    if details.coverage is None:
        return None
    return np.minimum(details.attention, details.coverage).sum(axis=1)


def final_coverage(details) -> np.ndarray:
    """Attention each source token received over the whole summary (c after the last step, See eq 10)."""
    return details.attention.sum(axis=0)


def _copied_markers(details):
    """Marker strings the summary produced (e.g. {"<oov-0>"})."""
    return {tok for tok, copied in zip(details.summary_markers, details.summary_copied_oov) if copied}


# ---------------------------------------------------------------------------------------------- PNG
def render_png(details, path, dpi: int = PNG_DPI, title: Optional[str] = None) -> Dict[str, int]:
    """Draw the attention heat map, p_gen, coverage overlap and final coverage into a PNG; returns the layout.

    Chinese, Japanese or Korean text is drawn with an installed CJK font (``cjk_font``); without one it would
    be boxes, and a warning says which package to install."""
    import matplotlib

    texts = [*details.source_tokens, *details.summary_tokens, title or ""]
    with matplotlib.rc_context({"font.family": font_families(texts)}):
        return _draw_png(details, path, dpi, title)


def _draw_png(details, path, dpi: int, title: Optional[str]) -> Dict[str, int]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    attention = np.asarray(details.attention, dtype=float)
    n_tgt, n_src = attention.shape
    has_p_gen, has_coverage = details.p_gen is not None, details.coverage is not None
    lay = png_layout(n_src, n_tgt, has_p_gen, has_coverage)
    width, height = lay["width"], lay["height"]
    fig = Figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    FigureCanvasAgg(fig)

    def axes(left, top, w, h):  # pixel box (from the top-left corner) -> figure fraction
        return fig.add_axes([left / width, 1 - (top + h) / height, w / width, h / height])

    heat_top = TOP + SOURCE_LABELS
    heat = axes(LEFT, heat_top, lay["heat_width"], lay["heat_height"])
    vmax = max(1e-9, float(attention.max()))
    heat.imshow(attention, aspect="auto", cmap="Blues", vmin=0.0, vmax=vmax, interpolation="nearest")
    labels_src = lay["cell_width"] >= LABEL_CELL
    labels_tgt = lay["cell_height"] >= LABEL_CELL
    heat.xaxis.tick_top()
    _label_ticks(heat.xaxis, details.source_tokens, details.source_oov, labels_src, rotation=90)
    _label_ticks(heat.yaxis, details.summary_tokens, details.summary_copied_oov, labels_tgt)
    heading = [title or "Attention: summary tokens (rows) over source tokens (columns)",
               f"white = 0, darkest blue = {vmax:.2f}; orange labels: OOV words"
               + ("" if labels_src and labels_tgt else "; token labels omitted (too many tokens)")]
    fig.text(10 / width, 1 - 8 / height, "\n".join(heading), fontsize=8, va="top", parse_math=False)

    rows = np.arange(n_tgt)
    left = LEFT + lay["heat_width"] + GAP
    side = []
    if has_p_gen:
        side.append((np.asarray(details.p_gen, dtype=float), "p_gen\n(1 generate, 0 copy)", 1.0))
    if has_coverage:
        overlap = coverage_overlap(details)
        side.append((overlap, "coverage overlap\nsum min(a, c)", max(1.0, float(overlap.max()))))
    for values, label, xmax in side:
        ax = axes(left, heat_top, SIDE_PANEL, lay["heat_height"])
        colours = ([_blend(COPY_RGB, GENERATE_RGB, v) for v in values] if label.startswith("p_gen")
                   else [tuple(c / 255 for c in COVERAGE_RGB)] * len(values))
        ax.barh(rows, values, height=0.8, color=colours)
        ax.set_ylim(n_tgt - 0.5, -0.5)  # row t level with heat-map row t
        ax.set_xlim(0, xmax)
        ax.set_yticks([])
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel(label, fontsize=7)
        left += SIDE_PANEL + GAP
    if has_coverage:
        ax = axes(LEFT, heat_top + lay["heat_height"] + GAP, lay["heat_width"], COVERAGE_PANEL)
        total = final_coverage(details)
        ax.bar(np.arange(n_src), total, width=0.8, color=tuple(c / 255 for c in COVERAGE_RGB))
        ax.axhline(1.0, color="grey", linewidth=0.6, linestyle="--")
        ax.set_xlim(-0.5, n_src - 0.5)
        ax.set_ylim(0, max(1.05, float(total.max()) * 1.05))
        ax.set_xticks([])
        ax.tick_params(axis="y", labelsize=7)
        ax.set_ylabel("coverage", fontsize=7)
    fig.savefig(path, dpi=dpi, format="png")
    return lay


def _label_ticks(axis, tokens, marked, show: bool, **style) -> None:
    """One tick label per token along a heat-map axis, the marked ones (OOV words) in orange and bold; no
    ticks when the cells are too small to be labelled."""
    if not show:
        axis.set_ticks([])
        return
    axis.set_ticks(range(len(tokens)), tokens, fontsize=7, parse_math=False, **style)
    for label, is_marked in zip(axis.get_ticklabels(), marked):
        if is_marked:
            label.set_color(OOV_COLOUR)
            label.set_fontweight("bold")


# ---------------------------------------------------------------------------------------------- CJK fonts
# Font families that cover Chinese (first found wins), and the file names they are installed under.
CJK_FAMILIES = ("WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Noto Sans CJK SC", "Noto Sans SC",
                "Source Han Sans SC", "Droid Sans Fallback", "AR PL UMing CN", "SimHei", "Microsoft YaHei",
                "PingFang SC")
CJK_FILE_HINTS = ("wqy", "notosanscjk", "notosanssc", "sourcehansans", "droidsansfallback", "uming", "simhei",
                  "msyh", "pingfang")


def has_cjk(text: str) -> bool:
    """True when ``text`` has a CJK ideograph, kana or hangul syllable (what DejaVu Sans cannot draw)."""
    return any("\u3040" <= ch <= "\u30ff" or "\u3400" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af"
               or "\uf900" <= ch <= "\ufaff" for ch in text)


@functools.lru_cache(maxsize=1)
def cjk_font() -> Optional[str]:
    """The family name of an installed CJK font, or None.  Fonts installed after matplotlib built its font
    cache are found by scanning the system font directories (once per process)."""
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    for family in CJK_FAMILIES:
        if family in installed:
            return family
    for path in font_manager.findSystemFonts():
        if any(hint in Path(path).name.lower() for hint in CJK_FILE_HINTS):
            font_manager.fontManager.addfont(path)
            return font_manager.FontProperties(fname=path).get_name()
    return None


def font_families(texts) -> List[str]:
    """matplotlib's font.family for these texts: DejaVu Sans, and a CJK font after it (matplotlib falls back
    glyph by glyph) when a text needs one."""
    if not any(has_cjk(text) for text in texts):
        return ["DejaVu Sans"]
    family = cjk_font()
    if family is None:
        warnings.warn("visualize: no CJK font is installed, so Chinese/Japanese/Korean characters are drawn as "
                      "boxes in the PNG (the HTML page is not affected); install one, e.g. the Debian package "
                      "fonts-wqy-microhei (scripts/setup.sh does when it runs as root)", stacklevel=3)
        return ["DejaVu Sans"]
    return ["DejaVu Sans", family]


def _blend(copy_rgb, generate_rgb, p_gen):
    p = min(1.0, max(0.0, float(p_gen)))
    return tuple(((1 - p) * c + p * g) / 255 for c, g in zip(copy_rgb, generate_rgb))


# ---------------------------------------------------------------------------------------------- HTML
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
.meta, .legend { color: #555; font-size: 0.9em; }
.summary-text { font-size: 1.1em; padding: 0.5em; background: #f6f6f6; border-left: 4px solid #3172ba; }
.tokens { line-height: 2.1; }
.tok { padding: 2px 3px; margin: 0 1px; border-radius: 3px; white-space: pre; }
.tok.special { color: #888; font-style: italic; }
.summary-tokens .tok { color: #fff; }
.tok.copied-oov { font-weight: bold; outline: 2px solid #d2640a; outline-offset: 1px; }
.tok.oov { font-weight: bold; text-decoration: underline dotted #d2640a; }
.tok.oov.copied { outline: 2px solid #d2640a; }
.swatch { display: inline-block; width: 1em; height: 1em; vertical-align: middle; border-radius: 2px; }
.scroll { overflow: auto; max-height: 80vh; border: 1px solid #ddd; }
table.heatmap { border-collapse: collapse; font-size: 11px; }
table.heatmap td { width: 14px; min-width: 14px; height: 14px; padding: 0; border: 1px solid #f2f2f2; }
table.heatmap thead th { position: sticky; top: 0; background: #fff; vertical-align: bottom; }
table.heatmap thead th span { writing-mode: vertical-rl; transform: rotate(180deg); white-space: pre; }
table.heatmap tbody th { position: sticky; left: 0; background: #fff; text-align: right; padding-right: 4px;
  white-space: pre; font-weight: normal; }
table.heatmap th.oov, table.heatmap th.copied-oov { color: #d2640a; font-weight: bold; }
table.heatmap tbody tr:hover th, table.heatmap tbody tr:hover td.num { background: #ffe9b3; }
table.heatmap td.num { width: auto; padding: 0 4px; text-align: right; font-variant-numeric: tabular-nums; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _rgba(rgb, alpha) -> str:
    return f"rgba({rgb[0]},{rgb[1]},{rgb[2]},{alpha:.2f})"


def _is_special(token: str) -> bool:
    return token in ("</s>", "<s>", "<pad>", "<unk>")


def render_html(details, title: str = "Attention visualisation", lang: str = "en") -> str:
    """The self-contained HTML page (a string); see the module docstring."""
    attention = np.asarray(details.attention, dtype=float)
    n_tgt, n_src = attention.shape
    p_gen = None if details.p_gen is None else np.asarray(details.p_gen, dtype=float)
    overlap = coverage_overlap(details)
    received = final_coverage(details)
    copied = _copied_markers(details)
    scale = max(1e-9, float(attention.max()))  # colours are relative to the largest attention, as in the PNG
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="{_e(lang)}">',
        '<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{CSS}</style></head>",
        "<body>",
        f"<header><h1>{_e(title)}</h1>",
        f'<p class="meta">{n_src} source tokens, {n_tgt} summary tokens; beam score {details.score:.3f}; '
        f"copy switch: {'yes' if p_gen is not None else 'no (model without copying)'}; "
        f"coverage: {'yes' if details.coverage is not None else 'no'}.</p></header>",
        '<section id="summary"><h2>Summary</h2>',
        f'<p class="summary-text">{_e(details.text)}</p>',
        '<div class="tokens summary-tokens" id="summary-tokens">',
    ]
    for t, (word, marker, is_copy) in enumerate(zip(details.summary_tokens, details.summary_markers,
                                                    details.summary_copied_oov)):
        classes = ["tok"]
        attrs = [f'data-step="{t}"']
        notes = [f"step {t}"]
        if p_gen is not None:
            classes.append("gen" if p_gen[t] >= 0.5 else "copy")
            attrs.append(f'data-p-gen="{p_gen[t]:.4f}"')
            notes.append(f"p_gen {p_gen[t]:.3f}")
            colour = tuple(round(255 * c) for c in _blend(COPY_RGB, GENERATE_RGB, p_gen[t]))
        else:
            colour = GENERATE_RGB
        if is_copy:
            classes.append("copied-oov")
            attrs.append(f'data-marker="{_e(marker)}"')
            notes.append(f"copied OOV word (model output {marker})")
        if overlap is not None:
            notes.append(f"coverage overlap {overlap[t]:.3f}")
        if _is_special(marker):
            classes.append("special")
        parts.append(f'<span class="{" ".join(classes)}" {" ".join(attrs)} style="background-color:'
                     f'{_rgba(colour, 1.0)}" title="{_e("; ".join(notes))}">{_e(word)}</span>')
    parts.append("</div>")
    legend = [f'<span class="swatch" style="background:{_rgba(GENERATE_RGB, 1)}"></span> generated (p_gen 1)',
              f'<span class="swatch" style="background:{_rgba(COPY_RGB, 1)}"></span> copied (p_gen 0)',
              '<span class="tok copied-oov" style="color:#222">word</span> copied OOV word']
    if p_gen is None:
        legend = ['no copy switch: every token is generated', legend[2]]
    parts.append(f'<p class="legend">{" &middot; ".join(legend)}</p></section>')

    parts.append('<section id="source"><h2>Source</h2>')
    parts.append('<p class="legend">Shading: attention received over the whole summary (the final coverage; '
                 'full colour = 1 or more). Underlined: OOV words; outlined: OOV words the summary copied.</p>')
    parts.append('<div class="tokens source-tokens" id="source-tokens">')
    for i, (word, marker, oov) in enumerate(zip(details.source_tokens, details.source_markers, details.source_oov)):
        classes = ["tok", "src"]
        attrs = [f'data-pos="{i}"', f'data-coverage="{received[i]:.4f}"']
        if oov:
            classes.append("oov")
            attrs.append(f'data-marker="{_e(marker)}"')
            if marker in copied:
                classes.append("copied")
        if _is_special(marker):
            classes.append("special")
        alpha = min(1.0, float(received[i]))
        parts.append(f'<span class="{" ".join(classes)}" {" ".join(attrs)} style="background-color:'
                     f'{_rgba(COVERAGE_RGB, alpha * 0.85)}" title="{_e(f"attention received {received[i]:.3f}")}">'
                     f"{_e(word)}</span>")
    parts.append("</div></section>")

    parts.append('<section id="attention"><h2>Attention</h2>')
    parts.append('<p class="legend">One row per summary token, one column per source token; a cell\'s colour is '
                 f"the attention a<sub>i</sub><sup>t</sup> (full colour = the largest on this page, {scale:.3f})."
                 + (" p_gen: probability of generating from the vocabulary." if p_gen is not None else "")
                 + (" overlap: &sum;<sub>i</sub> min(a<sub>i</sub><sup>t</sup>, c<sub>i</sub><sup>t</sup>), "
                    "attention on already covered words (the coverage loss of the step)."
                    if overlap is not None else "") + "</p>")
    parts.append('<div class="scroll"><table class="heatmap"><thead><tr><th class="corner"></th>')
    for word, oov in zip(details.source_tokens, details.source_oov):
        col_class = ' class="oov"' if oov else ""
        parts.append(f'<th scope="col"{col_class}><span>{_e(word)}</span></th>')
    if p_gen is not None:
        parts.append('<th scope="col" class="num-head">p_gen</th>')
    if overlap is not None:
        parts.append('<th scope="col" class="num-head">overlap</th>')
    parts.append("</tr></thead><tbody>")
    for t in range(n_tgt):
        row_class = ' class="copied-oov"' if details.summary_copied_oov[t] else ""
        cells = [f'<tr data-step="{t}"><th scope="row"{row_class}>{_e(details.summary_tokens[t])}</th>']
        for i in range(n_src):
            a = attention[t, i]
            if a / scale >= 0.005:
                cells.append(f'<td style="background:{_rgba(ATTENTION_RGB, a / scale)}" title="{a:.3f}"></td>')
            else:
                cells.append("<td></td>")
        if p_gen is not None:
            cells.append(f'<td class="num pgen">{p_gen[t]:.2f}</td>')
        if overlap is not None:
            cells.append(f'<td class="num overlap">{overlap[t]:.2f}</td>')
        cells.append("</tr>")
        parts.append("".join(cells))
    parts.append("</tbody></table></div></section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def save(details, html_path=None, png_path=None, title: Optional[str] = None, lang: str = "en"):
    """Write the HTML page and/or the PNG; returns the PNG layout (None without a PNG)."""
    if html_path is not None:
        page = render_html(details, title=title or "Attention visualisation", lang=lang)
        with open(html_path, "w", encoding="utf-8") as handle:
            handle.write(page)
    if png_path is not None:
        return render_png(details, png_path, title=title)
    return None
