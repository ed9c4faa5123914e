"""Readers for the PTB sample, Basque CoNLL-2007, Brown and the TREC question classes.

Data always goes through NLTK's data roots (``NLTK_DATA``): NLTK 3.10 refuses
corpus paths outside them. The files are read from there and parsed here,
strictly, because NLTK's own readers damage bad input silently (a CoNLL line
with too few columns ends the sentence, an unreadable tree becomes a flat
one, a Brown token without a tag gets the tag None). A file that cannot be
read (a damaged zip, bytes that are not in the corpus's encoding) is a
:class:`~..errors.CorpusError` naming it; a bad sentence (a CoNLL line with
fewer than 5 columns, an empty word or tag, a NUL byte, a tree that does not
parse or is not a treebank tree) is a CorpusError naming its file and line,
or, with ``skip_bad=True``, is left out and counted: the readers return a
:class:`CorpusItems` list whose ``skipped`` says which, and warn
(:class:`~..errors.CorpusWarning`).
"""
import os
import re
import warnings
import zipfile
import zlib
from functools import lru_cache
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from nltk.tree import Tree

from ..errors import BracketError, CorpusError, CorpusWarning, check_count
from ..trees.brackets import parse_bracketed
from ..trees.normalize import normalize_tree, tree_problem
from .labels import coarse_label

SPLITS = ("train", "dev", "test")
CORPORA = ("ptb", "basque", "brown", "qc-coarse", "qc-fine")
TaggedSentence = List[Tuple[str, str]]

# PTB sample (wsj_0001–wsj_0199): train 0001–0139, dev 0140–0169, test 0170–0199.
_PTB_RANGES = {"train": (1, 139), "dev": (140, 169), "test": (170, 199), "all": (1, 199)}
BASQUE_DEV_SIZE = 260
# TREC QC (Li & Roth 2002) has train (5,452) and test (500) only: every 10th
# training question (index % 10 == 9, 545 of them) is our dev split.
QC_DEV_EVERY = 10
# NLTK package -> (directory of the files inside it, their names, their encoding), as NLTK's loaders have them
_LAYOUT = {"treebank": ("combined", r"wsj_.*\.mrg", "utf-8"),
           "conll2007": ("", r"eus\.(train|test)", "iso-8859-2"),
           "brown": ("", r"c[a-z]\d\d", "ascii"),
           "qc": ("", r"(train|test)\.txt", "iso-8859-1")}
SKIP_HINT = "; pass skip_bad=True (convert --skip-bad) to leave out such sentences, counted"


class LabelledText(NamedTuple):
    """A classified text: its words (whitespace-tokenised as shipped) and its label."""
    words: Tuple[str, ...]
    label: str


class CorpusItems(list):
    """A corpus's items (trees or tagged sentences), with ``skipped``: the bad
    sentences left out (``skip_bad=True``), each as "file, line N: why"."""

    def __init__(self, items: Sequence = (), skipped: Sequence[str] = ()):
        super().__init__(items)
        self.skipped: List[str] = list(skipped)


def check_nltk_data(corpus: str) -> None:
    """Raise a :class:`CorpusError` that says how to fix a missing corpus."""
    _corpus_root(corpus, "")


def _corpus_root(corpus: str, directory: str):
    """NLTK's path pointer to ``directory`` of a corpus package, unzipped or zipped."""
    import nltk

    for resource in (f"corpora/{corpus}/{directory}", f"corpora/{corpus}.zip/{corpus}/{directory}"):
        try:
            return nltk.data.find(resource.rstrip("/") + "/")
        except LookupError:
            pass
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as err:
            raise CorpusError(_damaged(corpus, err)) from None
    roots = os.environ.get("NLTK_DATA")
    hint = (f"NLTK_DATA={roots!r} does not contain corpora/{corpus}(.zip)" if roots
            else "NLTK_DATA is not set; point it at an NLTK data directory (e.g. ../shared/nltk_data)")
    raise CorpusError(f"NLTK corpus {corpus!r} not found: {hint}. "
                      f"`python -m spacy project assets` fetches it.") from None


def _damaged(corpus: str, err: Exception, fileid: str = "") -> str:
    from .assets import local_copy

    where = local_copy(corpus) or f"corpora/{corpus}.zip"
    return (f"{where}{': ' + fileid if fileid else ''} cannot be read ({type(err).__name__}: {err}); "
            f"the zip is damaged: fetch it again (`python -m spacy_structpref fetch-data DIR`)")


_ROOTS: Dict[str, object] = {}  # location -> NLTK path pointer, for the per-file cache


def _corpus_files(corpus: str) -> Tuple[str, List[str]]:
    """(location, file names) of a corpus package's files."""
    from nltk.corpus.reader.util import find_corpus_fileids

    directory, pattern, _ = _LAYOUT[corpus]
    root = _corpus_root(corpus, directory)
    location = str(root)
    _ROOTS[location] = root
    try:
        files = sorted(find_corpus_fileids(root, pattern))
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as err:
        raise CorpusError(_damaged(corpus, err)) from None
    if not files:
        raise CorpusError(_damaged(corpus, FileNotFoundError(f"no file named like {pattern} in {location}")))
    return location, files


def _file_text(corpus: str, location: str, fileid: str) -> str:
    encoding = _LAYOUT[corpus][2]
    try:
        with _ROOTS[location].join(fileid).open() as stream:
            data = stream.read()
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as err:
        raise CorpusError(_damaged(corpus, err, fileid)) from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise CorpusError(f"{fileid}, line {line}: byte {data[err.start]:#04x} is not {encoding} text; "
                          "the file is damaged") from None


def _bad(skipped: List[str], skip_bad: bool, where: str) -> None:
    """Record a bad sentence, or raise for it."""
    if not skip_bad:
        raise CorpusError(f"{where}{SKIP_HINT}")
    skipped.append(where)


def _split_lines(text: str) -> Iterator[Tuple[int, str]]:
    """(number, line) at ``\\n`` only: ``str.splitlines`` also breaks at
    characters such as U+0085 that can stand inside a word."""
    for number, line in enumerate(text.split("\n"), 1):
        yield number, line[:-1] if line.endswith("\r") else line


# ------------------------------------------------------------------ CoNLL
CONLL_COLUMNS = ("ID", "FORM", "LEMMA", "CPOSTAG", "POSTAG", "FEATS", "HEAD", "DEPREL", "PHEAD", "PDEPREL")


def _conll_problem(cols: List[str]) -> Optional[str]:
    # exactly ten columns: a tab turned into spaces (which a word may hold) leaves fewer, shifted
    if len(cols) != len(CONLL_COLUMNS):
        return (f"{len(cols)} tab-separated column(s); a CoNLL-X token line has {len(CONLL_COLUMNS)} "
                f"({' '.join(CONLL_COLUMNS)})")
    if any("\0" in c for c in cols):
        return "a NUL byte"
    if not cols[1].strip():
        return "an empty word (FORM column)"
    if not cols[4].strip():
        return "an empty tag (POSTAG column)"
    if not cols[0].isdigit():
        return f"ID {cols[0]!r} is not a token number"
    return None


def read_conll(text: str, source: str, skip_bad: bool = False) -> CorpusItems:
    """(FORM, POSTAG) sentences of CoNLL-X text (Buchholz & Marsi 2006):
    one token a line, tab-separated, sentences ended by blank lines."""
    sents, skipped = [], []
    current: List[Tuple[str, str]] = []
    bad: Optional[str] = None
    for number, line in _split_lines(text + "\n"):
        if not line.strip():
            if bad is not None:
                skipped.append(bad)
            elif current:
                sents.append(tuple(current))
            current, bad = [], None
            continue
        cols = line.split("\t")
        problem = _conll_problem(cols)
        if problem is not None:
            if not skip_bad:
                raise CorpusError(f"{source}, line {number}: {problem}{SKIP_HINT}")
            bad = bad or f"{source}, line {number}: {problem}"  # the sentence goes, counted once
            continue
        current.append((cols[1], cols[4]))
    return CorpusItems(sents, skipped)


# ------------------------------------------------------------- brackets
_PAREN = re.compile(r"[()\n]")


def _bracketed_blocks(text: str) -> Iterator[Tuple[int, Optional[str], Optional[str]]]:
    """(line, tree text, None) for each top-level bracketed tree of a file,
    (line, None, problem) for text outside the trees or unbalanced brackets."""
    line, depth, start, start_line = 1, 0, 0, 1
    last, last_line = 0, 1  # where the text outside the trees starts

    def stray(end: int):
        gap = text[last:end]
        lead = len(gap) - len(gap.lstrip())
        return last_line + gap[:lead].count("\n"), gap.strip()

    for m in _PAREN.finditer(text):
        char = m.group()
        if char == "\n":
            line += 1
            continue
        if depth == 0:
            at, gap = stray(m.start())
            if gap:
                yield at, None, f"text outside any tree: {gap[:40]!r}"
            if char == ")":
                yield line, None, "a ')' that closes no bracket"
                last, last_line = m.end(), line
                continue
            start, start_line = m.start(), line
        depth += 1 if char == "(" else -1
        if depth == 0:
            yield start_line, text[start:m.end()], None
            last, last_line = m.end(), line
    if depth:
        yield start_line, None, f"{depth} unclosed '(': the file ends inside this tree"
    else:
        at, gap = stray(len(text))
        if gap:
            yield at, None, f"text outside any tree: {gap[:40]!r}"


def read_bracketed(text: str, source: str, skip_bad: bool = False) -> CorpusItems:
    """Normalised trees (:func:`~..trees.normalize_tree`) of a file of
    bracketed trees, as the Penn Treebank's ``.mrg`` files."""
    trees, skipped = [], []
    for line, block, problem in _bracketed_blocks(text):
        if problem is None and "\0" in block:
            line, problem = line + block[:block.index("\0")].count("\n"), "a NUL byte"
        if problem is None:
            try:
                tree = parse_bracketed(block)
                problem = tree_problem(tree)
                if problem is None:
                    tree = normalize_tree(tree)
            except (BracketError, ValueError) as err:
                problem = str(err)
        if problem is not None:
            _bad(skipped, skip_bad, f"{source}, line {line}: {problem}")
            continue
        trees.append(tree)
    return CorpusItems(trees, skipped)


# ----------------------------------------------------------- word/tag
def read_tagged(text: str, source: str, skip_bad: bool = False) -> CorpusItems:
    """(word, TAG) sentences of a file with one sentence a line of
    ``word/tag`` tokens (Brown; tags upper-cased as NLTK's reader does)."""
    sents, skipped = [], []
    for number, line in _split_lines(text):
        tokens = line.split()
        if not tokens:
            continue
        sentence, problem = [], "a NUL byte" if "\0" in line else None
        for token in tokens:
            cut = token.rfind("/")
            if cut <= 0 or cut == len(token) - 1:
                problem = problem or f"token {token!r} is not word/tag"
                break
            sentence.append((token[:cut], token[cut + 1:].upper()))
        if problem is not None:
            _bad(skipped, skip_bad, f"{source}, line {number}: {problem}")
            continue
        sents.append(tuple(sentence))
    return CorpusItems(sents, skipped)


# ---------------------------------------------------------- label text
_QC_LABEL = re.compile(r"[A-Z]+:[^\s:]+\Z")


def read_labelled(text: str, source: str, skip_bad: bool = False) -> CorpusItems:
    """:class:`LabelledText` items of a file with one ``COARSE:fine words…``
    line per text (the TREC question classes as NLTK ships them)."""
    items, skipped = [], []
    for number, line in _split_lines(text):
        if not line.strip():
            continue
        label, _, rest = line.partition(" ")
        words = tuple(rest.split())
        problem = ("a NUL byte" if "\0" in line else
                   f"label {label!r} is not COARSE:fine" if not _QC_LABEL.match(label) else
                   "no words after the label" if not words else None)
        if problem is not None:
            _bad(skipped, skip_bad, f"{source}, line {number}: {problem}")
            continue
        items.append(LabelledText(words, label))
    return CorpusItems(items, skipped)


_READERS = {"treebank": read_bracketed, "conll2007": read_conll, "brown": read_tagged, "qc": read_labelled}


@lru_cache(maxsize=None)
def _read_file(corpus: str, location: str, fileid: str, skip_bad: bool) -> Tuple[tuple, tuple]:
    items = _READERS[corpus](_file_text(corpus, location, fileid), fileid, skip_bad)
    return tuple(items), tuple(items.skipped)


def check_limit(limit) -> Optional[int]:
    """A reader's ``limit`` (the first n items): a positive integer, or 0 or
    None for all of them (as ``[corpora] limit`` in spaCy configs); a
    negative one is refused, not taken as "all but the last n"."""
    if limit is None or limit == 0 and not isinstance(limit, bool):
        return None
    return check_count("limit (0 or None: all)", limit, 1, error=CorpusError)


def _read(corpus: str, fileids: Sequence[str], skip_bad: bool, limit: Optional[int] = None,
          location: Optional[str] = None) -> CorpusItems:
    """The items of some files of a corpus package (in order; stops once it has ``limit``)."""
    limit = check_limit(limit)
    location = location or _corpus_files(corpus)[0]
    out = CorpusItems()
    for fileid in fileids:
        items, skipped = _read_file(corpus, location, fileid, skip_bad)
        out.extend(items)
        out.skipped.extend(skipped)
        if limit is not None and len(out) >= limit:
            break
    if out.skipped:
        warnings.warn(f"skipped {len(out.skipped)} bad sentence(s) of {corpus}; the first: {out.skipped[0]}",
                      CorpusWarning, stacklevel=3)
    return out


def _check_split(split: str, allowed: Sequence[str]) -> None:
    if split not in allowed:
        raise CorpusError(f"unknown split {split!r}; expected one of {', '.join(allowed)}")


def ptb_trees(split: str = "train", skip_bad: bool = False) -> CorpusItems:
    """Normalised (``TOP``-rooted, no traces, no function tags) PTB-sample trees.

    Returns fresh copies: callers may modify them."""
    _check_split(split, tuple(_PTB_RANGES))
    lo, hi = _PTB_RANGES[split]
    location, files = _corpus_files("treebank")
    read = _read("treebank", [f for f in files if lo <= int(f[4:8]) <= hi], skip_bad, location=location)
    return CorpusItems([t.copy(deep=True) for t in read], read.skipped)


def basque_sentences(split: str = "train", skip_bad: bool = False) -> CorpusItems:
    """Basque CoNLL-2007 (word, fine tag) sentences. Dev is the last 260
    sentences of ``eus.train``, train the rest, test is ``eus.test``."""
    _check_split(split, SPLITS)
    read = _read("conll2007", ["eus.test" if split == "test" else "eus.train"], skip_bad)
    if split != "test":
        read[:] = read[:-BASQUE_DEV_SIZE] if split == "train" else read[-BASQUE_DEV_SIZE:]
    return CorpusItems([list(s) for s in read], read.skipped)


def brown_sentences(limit: int = None, skip_bad: bool = False) -> CorpusItems:
    """Brown tagged sentences (the scale corpus); ``limit`` takes the first n
    (:func:`check_limit`)."""
    limit = check_limit(limit)
    location, files = _corpus_files("brown")
    read = _read("brown", files, skip_bad, limit, location)
    return CorpusItems([list(s) for s in read[:limit]], read.skipped)


def qc_questions(split: str = "train", granularity: str = "fine", skip_bad: bool = False) -> CorpusItems:
    """TREC question classification (Li & Roth 2002; NLTK's ``qc``):
    ``granularity`` ``"fine"`` keeps the 50 labels (``HUM:ind``),
    ``"coarse"`` their 6 families (``HUM``). Test is ``test.txt`` (500);
    dev is every 10th question of ``train.txt`` (545), train the other 4,907;
    ``"train+dev"`` is the whole of ``train.txt`` (5,452)."""
    _check_split(split, SPLITS + ("train+dev",))
    if granularity not in ("fine", "coarse"):
        raise CorpusError(f"unknown granularity {granularity!r}; expected 'fine' or 'coarse'")
    read = _read("qc", ["test.txt" if split == "test" else "train.txt"], skip_bad)
    if split in ("train", "dev"):
        keep = (lambda i: i % QC_DEV_EVERY == QC_DEV_EVERY - 1) if split == "dev" else \
            (lambda i: i % QC_DEV_EVERY != QC_DEV_EVERY - 1)
        read[:] = [q for i, q in enumerate(read) if keep(i)]
    if granularity == "coarse":
        read[:] = [LabelledText(q.words, coarse_label(q.label)) for q in read]
    return read


@lru_cache(maxsize=None)
def qc_labels(granularity: str = "fine") -> Tuple[str, ...]:
    """The sorted label set of TREC QC (that of ``train.txt``: every test label is in it)."""
    return tuple(sorted({q.label for q in qc_questions("train+dev", granularity)}))


def use_nltk_data(path) -> None:
    """Make ``path`` an NLTK data root (first in the search order), as setting
    ``NLTK_DATA`` would."""
    import nltk

    path = os.fspath(path)
    os.environ["NLTK_DATA"] = path
    if path not in nltk.data.path:
        nltk.data.path.insert(0, path)


def corpus_items(name: str, split: str, limit: int = None, skip_bad: bool = False) -> CorpusItems:
    """The raw items of a corpus split: normalised trees for ``ptb``, (word,
    tag) sentences for ``basque`` and ``brown``, :class:`LabelledText` for
    ``qc-coarse`` and ``qc-fine`` (see :func:`qc_questions`). Brown has no fixed split:
    sentence index % 10 == 9 is test, == 8 is dev, the rest train.
    ``skip_bad``: leave out bad sentences (counted in ``.skipped``) rather than fail.
    ``limit``: the first n items (0 or None: all; :func:`check_limit`)."""
    limit = check_limit(limit)
    if name == "ptb":
        items = ptb_trees(split, skip_bad)
    elif name == "basque":
        items = basque_sentences(split, skip_bad)
    elif name == "brown":
        _check_split(split, SPLITS)
        wanted = {"train": set(range(8)), "dev": {8}, "test": {9}}[split]
        every = brown_sentences(skip_bad=skip_bad)
        items = CorpusItems([s for i, s in enumerate(every) if i % 10 in wanted], every.skipped)
    elif name in ("qc-coarse", "qc-fine"):
        items = qc_questions(split, name[3:], skip_bad)
    else:
        raise CorpusError(f"unknown corpus {name!r}; expected one of {', '.join(CORPORA)}")
    return CorpusItems(items[:limit], items.skipped)


def item_to_doc(vocab, item):
    """A Doc from a corpus item: words, tags, and constituents for trees;
    words and ``doc.cats`` (every label of the set, 1.0 for the item's own)
    for a :class:`LabelledText` of TREC QC."""
    from spacy.tokens import Doc

    from ..trees.doc import tree_to_doc

    if isinstance(item, Tree):
        return tree_to_doc(vocab, item)
    if isinstance(item, LabelledText):
        labels = qc_labels("fine" if ":" in item.label else "coarse")
        if item.label not in labels:
            raise CorpusError(f"label {item.label!r} is not a TREC QC label")
        doc = Doc(vocab, words=list(item.words))
        doc.cats = {label: float(label == item.label) for label in labels}
        return doc
    if not item:
        raise CorpusError("empty sentence in corpus")
    for i, (word, tag) in enumerate(item):
        if not isinstance(word, str) or not word or not isinstance(tag, str):
            raise CorpusError(f"token {i} of a corpus sentence is ({word!r}, {tag!r}): words must be non-empty "
                              "strings and tags strings")
    return Doc(vocab, words=[w for w, _ in item], tags=[t for _, t in item])


def corpus_docs(name: str, split: str, vocab, limit: int = None, skip_bad: bool = False):
    """Docs of one corpus split (see :func:`corpus_items`)."""
    return [item_to_doc(vocab, item) for item in corpus_items(name, split, limit, skip_bad)]
