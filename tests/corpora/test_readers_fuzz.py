"""A bounded fuzz of the corpus readers (CoNLL, Brown word/tag, bracketed
files): generated corpora, damaged at random, must read back exactly, give a
clear error naming the damage, or (asked to skip) give the undamaged
sentences with the damage counted; never another exception, never silently
changed data. Every test marked ``fuzz`` (``pytest -m fuzz``) is part of the
bounded fuzz suite."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.corpora import read_bracketed, read_conll, read_tagged
from spacy_structpref.errors import CorpusError
from spacy_structpref.trees import normalize_tree

from tests.helpers.strategies import trees

pytestmark = pytest.mark.fuzz

# Words with characters that break naive readers: str.splitlines breaks at
# U+0085, U+2028, \x0b and \x1c; "/" is Brown's separator; a space is in a word.
WORDS = ["a", "b", "la\x85c", "x\u2028y", "p\x0bq", "r\x1cs", "1/2", "n y", "é"]
TAGS = ["NN", "VB", "DT", "IN"]


# ---------------------------------------------------------------- CoNLL
def conll_line(i: int, word: str, tag: str) -> str:
    return f"{i}\t{word}\t{word}\t{tag[0]}\t{tag}\t_\t0\tROOT\t_\t_"


CONLL_DAMAGE = {
    "few columns": lambda line: "\t".join(line.split("\t")[:3]),
    "NUL byte": lambda line: line.replace("\t", "\0\t", 1),
    "empty word": lambda line: "\t".join(c if i != 1 else "" for i, c in enumerate(line.split("\t"))),
    "empty tag": lambda line: "\t".join(c if i != 4 else " " for i, c in enumerate(line.split("\t"))),
    # a tab turned into a space (a word may hold spaces: the columns would shift), or one column too many
    "tab as space": lambda line: line.replace("\t", " ", 1),
    "extra column": lambda line: line + "\t_",
}
sentences = st.lists(st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(TAGS)), min_size=1, max_size=5),
                     min_size=1, max_size=8)


@settings(max_examples=400, deadline=None)
@given(sentences, st.data())
def test_conll_damage_is_named_or_skipped_never_silent(sents, data):
    lines, owner = [], []  # owner[k]: the sentence of line k (None: a blank line)
    for n, sent in enumerate(sents):
        for i, (word, tag) in enumerate(sent):
            lines.append(conll_line(i + 1, word, tag))
            owner.append(n)
        lines.append("")
        owner.append(None)
    token_lines = [k for k, o in enumerate(owner) if o is not None]
    damaged = sorted(set(data.draw(st.lists(st.sampled_from(token_lines), max_size=3))))
    for k in damaged:
        lines[k] = CONLL_DAMAGE[data.draw(st.sampled_from(sorted(CONLL_DAMAGE)))](lines[k])
    newline = data.draw(st.sampled_from(["\n", "\r\n"]))
    text = newline.join(lines)
    good = [tuple(s) for n, s in enumerate(sents) if n not in {owner[k] for k in damaged}]
    if damaged:
        with pytest.raises(CorpusError, match=f"^f, line {damaged[0] + 1}: "):
            read_conll(text, "f")
    else:
        assert list(read_conll(text, "f")) == good
    read = read_conll(text, "f", skip_bad=True)
    assert list(read) == good and len(read.skipped) == len({owner[k] for k in damaged})


# ------------------------------------------------------- Brown word/tag
@settings(max_examples=300, deadline=None)
@given(sentences, st.data())
def test_tagged_damage_is_named_or_skipped_never_silent(sents, data):
    words = [[w.replace(" ", "_").replace("\x85", "").replace("\u2028", "").replace("\x0b", "").replace("\x1c", "")
              for w, _ in s] for s in sents]  # Brown words hold no whitespace
    lines = [" ".join(f"{w}/{t.lower()}" for w, (_, t) in zip(ws, s)) for ws, s in zip(words, sents)]
    damaged = sorted(set(data.draw(st.lists(st.integers(0, len(lines) - 1), max_size=3))))
    for k in damaged:
        how = data.draw(st.sampled_from(["untagged", "no word", "no tag", "NUL"]))
        first = lines[k].split(" ")[0]
        word, tag = first.rsplit("/", 1)
        bad = {"untagged": word.replace("/", ""), "no word": f"/{tag}", "no tag": f"{word}/",
               "NUL": f"{word}\0/{tag}"}[how]
        lines[k] = " ".join([bad] + lines[k].split(" ")[1:])
    text = "\n\n\t" + "\n\n\t".join(lines) + "\n"
    good = [tuple(zip(ws, (t for _, t in s))) for n, (ws, s) in enumerate(zip(words, sents)) if n not in damaged]
    if damaged:
        with pytest.raises(CorpusError, match=f"^f, line {3 + 2 * damaged[0]}: "):
            read_tagged(text, "f")
    read = read_tagged(text, "f", skip_bad=True)
    assert list(read) == good and len(read.skipped) == len(damaged)


# ----------------------------------------------------- bracketed files
@settings(max_examples=300, deadline=None)
@given(st.lists(trees(words=["a", "b", "é"]), min_size=1, max_size=6), st.data())
def test_treebank_damage_is_named_or_skipped_never_silent(tree_list, data):
    blocks = [Tree("", [t]).pformat(margin=data.draw(st.sampled_from([30, 10000]))) for t in tree_list]
    damaged = sorted(set(data.draw(st.lists(st.integers(0, len(blocks) - 1), max_size=2))))
    for k in damaged:
        how = data.draw(st.sampled_from(["NUL", "word under phrase", "stray"]))
        if how == "NUL":
            blocks[k] = blocks[k].replace(")", "\0)", 1)
        elif how == "word under phrase":  # before the first child of the tree's root constituent
            at = [i for i, c in enumerate(blocks[k]) if c == "("][2]
            blocks[k] = blocks[k][:at] + "stray " + blocks[k][at:]
        else:
            blocks[k] = "stray\n" + blocks[k]
    text = "\n".join(blocks) + "\n"
    lost = {k for k in damaged if not blocks[k].startswith("stray\n")}
    good = [normalize_tree(t) for k, t in enumerate(tree_list) if k not in lost]
    if damaged:  # named at the tree's first line; a NUL at its own line
        block = blocks[damaged[0]]
        line = text[:text.index(block)].count("\n") + 1 + (block[:block.find("\0")].count("\n") if "\0" in block else 0)
        with pytest.raises(CorpusError, match=f"^f, line {line}: "):
            read_bracketed(text, "f")
    else:
        assert list(read_bracketed(text, "f")) == good
    read = read_bracketed(text, "f", skip_bad=True)
    assert list(read) == good and len(read.skipped) == len(damaged)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="() ab\n\0", max_size=60))
def test_any_text_reads_as_trees_or_a_corpus_error(text):
    try:
        read = read_bracketed(text, "f")
    except CorpusError as err:
        assert str(err).startswith("f, line ")
        read = read_bracketed(text, "f", skip_bad=True)
        assert read.skipped
    assert all(t.label() == "TOP" for t in read)
