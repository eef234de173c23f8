"""Tokenization units and their inverse (detokenization), for English and Chinese.

Units
-----
``keep``   the input is already tokenized: split on whitespace (optionally lower-cased).
``word``   simple deterministic English word tokenization: NFC, lower-case, then tokens are numbers with inner
           ``.``/``,`` (``3.5``, ``1,000``), letter/digit runs with inner apostrophes or hyphens (``don't``,
           ``state-of-the-art``), or any other single non-space character (punctuation, symbols).
``char``   Chinese: every CJK character (ideographs, kana, hangul, bopomofo) is one token; a run of other
           letters/digits (``MRP``, ``2019``, ``x86``) is one token; every other non-space character is one
           token.
``jieba``  Chinese words segmented by jieba (default dictionary, HMM on); whitespace is dropped.
``sp``     sentencepiece pieces, with a model trained by ``summ-prepare`` on the training split.  The model
           keeps every character as written (sentencepiece's ``identity`` normalization, not its default NFKC,
           which turns ``，：？！（）`` and full-width letters and digits into ASCII that detokenization cannot
           undo, so summaries would be scored against references that keep them); runs of whitespace (any
           Unicode space, such as U+3000) become one space before encoding, as in training.  Models of older
           runs, trained with NFKC, still load and normalize as they did.

Control and invisible characters are normalised before tokenization (``clean_text``): the C0 and C1 control
characters other than tab, newline and carriage return (NUL, BEL, ESC, NEL...) become spaces, and so does the
zero-width space; the other format characters (zero-width joiners, bidirectional marks and embeddings, the soft
hyphen, word joiners, an inner byte-order mark) are removed.  So no token, and hence no summary, holds one.

Sentence separators (``<q>``, ``##SENT##``, written between the sentences of a multi-sentence summary) are one
token under every unit, wherever they stand in the text: the text is cut at them, each piece tokenized, and the
separator kept as it is written (never lower-cased, split into ``<``, ``q``, ``>`` or made into sentencepiece
pieces).  Detokenization puts them back between the sentences, with a space on each side, so that every ROUGE
tool of the package splits there.

Detokenization (used after generation): English units join tokens with single spaces; Chinese units join
tokens without spaces, except that a space is kept between two tokens that meet with letters/digits on both
sides (``deep learning``); ``sp`` concatenates the pieces and turns the ``▁`` word-boundary mark into spaces
(done directly rather than with the model, so that pieces the model does not know, such as copied OOV words,
come back verbatim).  That is the form ROUGE scores.  ``display_text`` is the form users read: English ``keep``
and ``word`` tokens are detokenized with sacremoses (Moses' rules, the detokenizer fairseq uses), "the model
(a gru) didn't win, sadly" rather than "the model ( a gru ) didn't win , sadly"; the other units are already
text.

Lower-casing (``--lowercase``, and always for ``word``) loses the source's spelling; ``Tokenizer.surface`` gives
each token as the source wrote it, so that a copied OOV word comes back as "Smallville", not "smallville".
"""
import re
import unicodedata

LANGS = ("en", "zh")
UNITS_BY_LANG = {"en": ("keep", "word", "sp"), "zh": ("char", "jieba", "keep", "sp")}
DEFAULT_UNIT = {"en": "keep", "zh": "char"}
SP_SPACE = "\u2581"
SP_NORMALIZATION = "identity"
# sentencepiece's built-in rules; the NFKC ones are accepted only to rebuild a model as older runs trained it
SP_NORMALIZATIONS = ("identity", "nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf")

# CJK scripts written without spaces: CJK symbols/punctuation block excluded on purpose (they are
# punctuation and become single tokens anyway).
_CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u312f"  # Bopomofo
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31a0-\u31bf"  # Bopomofo extended
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width katakana
    "\U00020000-\U0003134f"  # CJK extensions B-G, compatibility supplement
)
_CJK = re.compile(f"[{_CJK_RANGES}]")
# A run of letters/digits that are not CJK, or any single other non-space character.
_CHAR_TOKEN = re.compile(f"[^\\W_{_CJK_RANGES}]+|\\S")
_WORD_TOKEN = re.compile(r"\d+(?:[.,]\d+)+|[^\W_]+(?:['\u2019\-][^\W_]+)*|\S")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b]")  # Cc but tab, LF, CR; zero-width space
SENTENCE_SEPARATORS = ("<q>", "##SENT##")
_SEPARATOR = re.compile("(" + "|".join(re.escape(sep) for sep in SENTENCE_SEPARATORS) + ")")


def invisible_count(text: str) -> int:
    """How many characters of ``text`` ``clean_text`` replaces or removes."""
    if text.isprintable():
        return 0
    return sum(1 for ch in text if _CONTROL.match(ch) or unicodedata.category(ch) == "Cf")


def clean_text(text: str) -> str:
    """``text`` with its control characters and the zero-width space as spaces, its other format characters
    (Unicode category Cf) removed."""
    if text.isprintable():  # the usual case: no control, format or non-ASCII space character
        return text
    text = _CONTROL.sub(" ", text)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def split_at_separators(text: str, tokenize):
    """The tokens of ``text``: each piece between sentence separators tokenized by ``tokenize``, each separator
    kept as one token."""
    tokens = []
    for piece in _SEPARATOR.split(text):
        if piece in SENTENCE_SEPARATORS:
            tokens.append(piece)
        elif piece:
            tokens.extend(tokenize(piece))
    return tokens


def without_separators(text: str) -> str:
    """``text`` with its sentence separators turned into spaces (the text a sentencepiece model learns from)."""
    return _SEPARATOR.sub(" ", text)


def _by_sentence(tokens, join) -> str:
    """Tokens joined sentence by sentence with ``join``, the sentences joined by their separators with a space
    on each side."""
    parts, sentence = [], []
    for tok in list(tokens) + [None]:
        if tok is None or tok in SENTENCE_SEPARATORS:
            if sentence:
                parts.append(join(sentence))
            if tok is not None:
                parts.append(tok)
            sentence = []
        else:
            sentence.append(tok)
    return " ".join(parts)


def is_cjk(ch: str) -> bool:
    return _CJK.match(ch) is not None


def _is_run_char(ch: str) -> bool:
    """A letter or digit outside the CJK scripts (the characters that form multi-character tokens)."""
    return ch.isalnum() and not is_cjk(ch)


def word_tokenize(text: str):
    return _WORD_TOKEN.findall(unicodedata.normalize("NFC", text).lower())


def char_tokenize(text: str):
    return _CHAR_TOKEN.findall(text)


_jieba = None


def _get_jieba():
    global _jieba
    if _jieba is None:
        import logging
        import warnings

        with warnings.catch_warnings():  # jieba 0.42 imports the deprecated pkg_resources
            warnings.simplefilter("ignore")
            import jieba

        jieba.setLogLevel(logging.ERROR)
        jieba.initialize()
        _jieba = jieba
    return _jieba


def jieba_tokenize(text: str):
    jieba = _get_jieba()
    return [tok for word in jieba.cut(text) for tok in word.split()]


def load_sentencepiece(path):
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=str(path))


class Tokenizer:
    """Callable turning one document (a string) into a list of tokens without whitespace inside."""

    def __init__(self, lang: str, unit: str, lowercase: bool = False, sp_model_path=None):
        check_unit(lang, unit)
        self.lang, self.unit, self.lowercase = lang, unit, lowercase
        self._sp = None
        if unit == "sp":
            if sp_model_path is None:
                raise ValueError("unit 'sp' needs a sentencepiece model")
            self._sp = load_sentencepiece(sp_model_path)
        elif unit == "jieba":
            _get_jieba()

    def surface(self, text: str, tokens):
        """``tokens`` (this tokenizer's tokens of ``text``) as ``text`` spells them: the tokens of the text before
        lower-casing, when they lower-case to exactly ``tokens``; else ``tokens`` themselves (``sp`` and
        ``jieba`` segment lower-cased text in their own way, and a few characters change length when
        lower-cased)."""
        if not (self.lowercase or self.unit == "word") or self.unit in ("sp", "jieba"):
            return tokens
        if self.unit == "word":
            cased = split_at_separators(clean_text(text), lambda piece: _WORD_TOKEN.findall(unicodedata.normalize("NFC", piece)))
        else:
            cased = Tokenizer(self.lang, self.unit)(text)
        if len(cased) == len(tokens) and all(c == t or c.lower() == t for c, t in zip(cased, tokens)):
            return cased
        return tokens

    def __call__(self, text: str):
        return split_at_separators(clean_text(text), self._tokenize)

    def _tokenize(self, text: str):
        """The tokens of a text without sentence separators."""
        if self.lowercase:
            text = text.lower()
        unit = self.unit
        if unit == "keep":
            return text.split()
        if unit == "word":
            return word_tokenize(text)
        if unit == "char":
            return char_tokenize(text)
        if unit == "jieba":
            return jieba_tokenize(text)
        # sp: a piece never contains whitespace (sentencepiece maps spaces to U+2581; it would keep the other
        # whitespace characters inside pieces under identity normalization, so they become spaces first)
        text = " ".join(text.split())
        return [piece for piece in self._sp.encode(text, out_type=str) if piece.strip()]


def check_unit(lang: str, unit: str):
    if lang not in UNITS_BY_LANG:
        raise ValueError(f"unknown language {lang!r} (choose from {', '.join(LANGS)})")
    if unit not in UNITS_BY_LANG[lang]:
        raise ValueError(
            f"unit {unit!r} is not available for language {lang!r} (choose from {', '.join(UNITS_BY_LANG[lang])})"
        )


def detokenize(tokens, lang: str, unit: str) -> str:
    """Inverse of tokenization as far as possible (see module docstring)."""
    return clean_text(_by_sentence([tok for tok in tokens if tok], lambda sentence: _detokenize(sentence, lang, unit)))


def _detokenize(tokens, lang: str, unit: str) -> str:
    """One sentence's tokens as text."""
    if unit == "sp":
        return " ".join("".join(tokens).replace(SP_SPACE, " ").split())
    if lang == "zh":
        out = []
        for tok in tokens:
            if out and _is_run_char(out[-1][-1]) and _is_run_char(tok[0]):
                out.append(" ")
            out.append(tok)
        return "".join(out)
    return " ".join(tokens)


_moses = None


def display_text(tokens, lang: str, unit: str) -> str:
    """The text users read: English ``keep``/``word`` tokens detokenized by sacremoses (its escaping and
    unescaping off: the tokens are raw text), every other unit as ``detokenize``."""
    global _moses
    if lang != "en" or unit == "sp":
        return detokenize(tokens, lang, unit)
    if _moses is None:
        from sacremoses import MosesDetokenizer

        _moses = MosesDetokenizer(lang="en")
    return clean_text(_by_sentence([tok for tok in tokens if tok],
                                   lambda sentence: _moses.detokenize(sentence, unescape=False)))


def _chunks(text: str, max_chars: int):
    """Cut a long text into pieces of at most ``max_chars`` characters, at whitespace where possible."""
    while len(text) > max_chars:
        cut = text.rfind(" ", 0, max_chars + 1)
        if cut <= 0:
            cut = max_chars
        yield text[:cut]
        text = text[cut:].lstrip(" ")
    if text:
        yield text


def train_sentencepiece(texts, model_prefix, vocab_size: int, model_type: str, lang: str,
                        max_sentences: int = 2_000_000, num_threads: int = 2, seed: int = 1,
                        normalization: str = SP_NORMALIZATION):
    """Train a sentencepiece model on an iterable of documents; writes ``model_prefix``.model/.vocab.

    Sentence separators are left out (they are tokens of their own, never pieces).  Documents are cut into chunks of at most 2,000 characters (sentencepiece skips longer "sentences"); at
    most ``max_sentences`` chunks are sampled (reproducibly: fixed seed).  The vocabulary size is a soft
    limit (a small corpus yields fewer pieces instead of failing); the real size is returned.
    ``normalization`` is sentencepiece's rule name: ``identity`` (the default: pieces spell the text as
    written, so summaries detokenize to the characters of the references); the NFKC rules only reproduce
    the models of older runs.
    """
    if normalization not in SP_NORMALIZATIONS:
        raise ValueError(f"unknown sentencepiece normalization {normalization!r} "
                         f"(choose from {', '.join(SP_NORMALIZATIONS)})")
    import sentencepiece as spm

    spm.set_random_generator_seed(seed)

    def chunks():
        for text in texts:
            yield from _chunks(" ".join(without_separators(clean_text(text)).split()), 2000)

    spm.SentencePieceTrainer.train(
        sentence_iterator=chunks(),
        model_prefix=str(model_prefix),
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=0.9995 if lang == "zh" else 1.0,
        hard_vocab_limit=False,
        max_sentence_length=8192,
        normalization_rule_name=normalization,
        input_sentence_size=max_sentences,
        shuffle_input_sentence=True,
        num_threads=num_threads,
        minloglevel=2,
    )
    return load_sentencepiece(f"{model_prefix}.model").get_piece_size()
