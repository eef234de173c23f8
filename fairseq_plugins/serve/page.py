"""The page at ``GET /``: one self-contained HTML document (inline CSS and script, no build step, no external
assets).  Paste or upload a text, choose decoding options (the model's own are filled in), and the page posts
``{"documents": [text], "options": {...}, "details": true}`` to ``/summarize`` and shows:
  * the summary (``#summary``);
  * the source as the model read it, each token shaded by its copy weight, the probability mass the copy
    distribution put on it over the whole summary, ``sum_t (1 - p_gen^t) a_i^t`` (See eqs 8-9; for a model
    without a copy switch, the attention it received, ``sum_t a_i^t``, the final coverage of See eq 10, as
    ``visualize.final_coverage``); source tokens whose word the copy distribution produced in the summary carry
    the class ``copied`` (``#source``; ``copied_steps``);
  * the counts of what the model did not read of the document (truncation), and any error the server gave.

:func:`copy_view` turns a :class:`fairseq_plugins.inference.hub.SummaryDetails` into the JSON the page reads.
"""
import html
import json
from typing import Dict, List

import numpy as np

from fairseq_plugins.viz.visualize import final_coverage

SPECIAL = ("</s>", "<s>", "<pad>", "<unk>")


def copy_view(details) -> Dict:
    """One document's summary, source tokens (as words) with their copy weights, and which source tokens were
    copied: the source positions holding a summary token that the copy distribution produced (``copied_steps``)."""
    attention = np.asarray(details.attention, dtype=float)  # T x S
    if details.p_gen is not None:
        p_gen = np.asarray(details.p_gen, dtype=float)  # T
        weight = ((1.0 - p_gen)[:, None] * attention).sum(axis=0)  # S: copy mass per source token (See eq 9)
    else:
        weight = final_coverage(details)  # S
    source = details.source_markers or details.source_tokens
    summary = details.summary_markers or details.summary_tokens
    copied_words = {summary[t] for t in copied_steps(details)}
    return {
        "summary": details.text,
        "source_tokens": list(details.source_tokens),
        "copy_weight": [round(float(w), 4) for w in weight],
        "copied": [token in copied_words for token in source],
        "summary_tokens": list(details.summary_tokens),
        "p_gen": None if details.p_gen is None else [round(float(p), 4) for p in details.p_gen],
    }


def copied_steps(details) -> List[int]:
    """The output steps t whose token the copy distribution produced: more than half of P(y_t) is its copy
    part, (1 - p_gen^t) sum_{i: x_i = y_t} a_i^t (See eq 9), P(y_t) being the beam's positional score.
    A copied OOV marker always counts (only copying can produce it); without a copy switch, nothing else does."""
    source = details.source_markers or details.source_tokens
    summary = details.summary_markers or details.summary_tokens
    steps = [t for t, oov in enumerate(details.summary_copied_oov) if oov]
    if details.p_gen is None:
        return steps
    attention = np.asarray(details.attention, dtype=float)  # T x S
    probability = np.exp(np.asarray(details.positional_scores, dtype=float))  # T: P(y_t)
    for t, token in enumerate(summary):
        if token in SPECIAL or t in steps:
            continue
        same = [i for i, word in enumerate(source) if word == token]
        copy = (1.0 - float(details.p_gen[t])) * attention[t, same].sum()
        if copy > 0.5 * probability[t]:
            steps.append(t)
    return sorted(steps)


def render_page(defaults: Dict, limits, model_name: str, option_help: Dict[str, str]) -> str:
    """The page, with the model's decoding ``defaults`` filled into the form and each option's ``option_help``
    beside it."""
    settings = json.dumps({"defaults": defaults, "max_document_chars": limits.max_document_chars,
                           "help": option_help})
    settings = settings.replace("<", "\\u003c")  # nothing in the JSON can close the script element
    return PAGE.replace("{{MODEL}}", html.escape(model_name)).replace("{{SETTINGS}}", settings)


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>summ-serve: {{MODEL}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 60em; color: #222; padding: 0 1em; }
textarea { width: 100%; min-height: 10em; font: inherit; }
fieldset { border: 1px solid #ccc; margin: 1em 0; }
label { display: inline-block; margin: 0.2em 1em 0.2em 0; }
input[type=number] { width: 5em; }
#summary { font-size: 1.15em; padding: 0.6em; background: #f4f7fb; border-left: 4px solid #3172ba; min-height: 1em; }
#source { line-height: 2; }
#source span { padding: 1px 2px; border-radius: 3px; }
#source span.copied { outline: 1px solid #d2640a; font-weight: bold; }
#error { color: #b00020; }
.meta { color: #555; font-size: 0.9em; }
</style>
</head>
<body>
<h1>Summarize</h1>
<p class="meta">Model: {{MODEL}}. Outlined in the source: the words the summary copied (most of the summary
word's probability came from the copy distribution). The orange shade is the copy weight: the probability the copy
distribution put on the word over the whole summary.</p>
<form id="form">
<textarea id="text" name="text" placeholder="Paste a document here"></textarea>
<p><label>or upload a text file: <input type="file" id="file" accept=".txt,text/plain"></label></p>
<fieldset><legend>Decoding options (the model's own by default)</legend>
<label>beam <input type="number" id="beam" min="1" step="1"></label>
<label>max_len_b <input type="number" id="max_len_b" min="1" step="1"></label>
<label>min_len <input type="number" id="min_len" min="1" step="1"></label>
<label>lenpen <input type="number" id="lenpen" min="0" step="0.1"></label>
<label>block_ngram_repeat <input type="number" id="block_ngram_repeat" min="0" step="1"></label>
<label>coverage_penalty <input type="number" id="coverage_penalty" min="0" step="0.1"></label>
</fieldset>
<button type="submit" id="submit">Summarize</button> <span id="status" class="meta"></span>
</form>
<p id="error" role="alert"></p>
<h2>Summary</h2>
<p id="summary" aria-live="polite"></p>
<h2>Source as the model read it</h2>
<p id="report" class="meta"></p>
<div id="source"></div>
<script id="settings" type="application/json">{{SETTINGS}}</script>
<script>
"use strict";
const settings = JSON.parse(document.getElementById("settings").textContent);
const NUMBERS = ["beam", "max_len_b", "min_len", "lenpen", "block_ngram_repeat", "coverage_penalty"];
const $ = (id) => document.getElementById(id);

for (const name of NUMBERS) {
  if (settings.defaults[name] !== undefined) $(name).value = settings.defaults[name];
  const help = settings.help[name];
  if (help) {
    $(name).title = help;
    const note = document.createElement("span");
    note.className = "meta";
    note.textContent = " (" + help + ")";
    $(name).parentElement.append(note);
  }
}

$("file").addEventListener("change", () => {
  const file = $("file").files[0];
  if (!file) return;
  const reader = new FileReader();
  reader.onload = () => { $("text").value = reader.result; };
  reader.readAsText(file);
});

function options() {
  const chosen = {};
  for (const name of NUMBERS) {
    const value = $(name).value.trim();
    if (value !== "" && Number(value) !== settings.defaults[name]) chosen[name] = Number(value);
  }
  return chosen;
}

function showSource(view) {
  const source = $("source");
  source.replaceChildren();
  const top = Math.max(1e-9, ...view.copy_weight);
  view.source_tokens.forEach((token, i) => {
    if (token === "</s>") return;
    const span = document.createElement("span");
    span.textContent = token;
    span.title = "copy weight " + view.copy_weight[i].toFixed(3);
    span.style.backgroundColor = "rgba(230, 120, 20, " + (0.75 * view.copy_weight[i] / top).toFixed(3) + ")";
    if (view.copied[i]) span.className = "copied";
    source.append(span, " ");
  });
}

function showReport(input) {
  const parts = [input.tokens + " tokens"];
  if (input.truncated_tokens) parts.push("truncated: the last " + input.truncated_tokens + " were not read");
  if (input.overflow_words) parts.push(input.overflow_words + " OOV words read as <unk>");
  $("report").textContent = parts.join("; ");
}

async function summarize(event) {
  if (event) event.preventDefault();
  $("error").textContent = "";
  if ($("text").value.trim() === "") {
    for (const id of ["summary", "report", "status"]) $(id).textContent = "";
    $("source").replaceChildren();
    $("error").textContent = "The document is empty: there is nothing to summarize.";
    return;
  }
  $("status").textContent = "summarizing...";
  $("submit").disabled = true;
  try {
    const response = await fetch("summarize", {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({documents: [$("text").value], options: options(), details: true}),
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error || response.statusText);
    $("summary").textContent = answer.summaries[0];
    showReport(answer.inputs[0]);
    showSource(answer.details[0]);
    $("status").textContent = "done";
  } catch (err) {
    $("error").textContent = String(err.message || err);
    $("status").textContent = "";
  } finally {
    $("submit").disabled = false;
  }
}

$("form").addEventListener("submit", summarize);
</script>
</body>
</html>
"""
