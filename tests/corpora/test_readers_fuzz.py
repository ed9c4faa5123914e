"""The bounded fuzz of issue #14 for corpus reading, the EVALB scorer and
grammar training: generated inputs, damaged at random, must give the exact
data back, a clear error naming the damage, or (asked to skip) the
undamaged data with the damage counted; never another exception, never a
silently changed result. The rest of the fuzz suite (brackets, kernels,
model loading) is in test_trees_brackets, test_hardening_numerics and
test_hardening_saving; ``pytest -m fuzz`` runs all of it."""
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.corpora import read_bracketed, read_conll, read_tagged
from spacy_structpref.errors import CorpusError, GrammarError, StructPrefError
from spacy_structpref.parsing.grammar import estimate_grammar
from spacy_structpref.scoring.parseval import (COLLINS, EvalbParams, evalb, evalb_lines, sentence_stats)
from spacy_structpref.trees import normalize_tree, to_bracketed

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


# ------------------------------------------------------------------ EVALB
EVALB_TAGS = ["NN", "VB", ",", ".", "-NONE-", "``"]
EVALB_LABELS = ["S", "NP", "VP", "PRT", "ADVP", "NP-SBJ", "TOP", ".", ""]


@st.composite
def tree_pairs(draw):
    """A gold tree and a test tree over the same words, bracketed and tagged
    independently (so punctuation tags may differ: EVALB's length errors)."""
    gold = draw(trees(labels=EVALB_LABELS, tags=EVALB_TAGS, words=["a", "b", "."]))
    words = gold.leaves()
    test = draw(trees(labels=EVALB_LABELS, tags=EVALB_TAGS, words=["w"]))
    leaves = test.treepositions("leaves")
    if len(leaves) < len(words):
        test = Tree("TOP", [test] + [Tree(draw(st.sampled_from(EVALB_TAGS)), ["w"])
                                     for _ in range(len(words) - len(leaves))])
        leaves = test.treepositions("leaves")
    for pos, word in zip(leaves, words):  # extra leaves keep "w": EVALB's length or word errors
        test[pos] = word
    if draw(st.booleans()):
        test = gold.copy(deep=True)
    return gold, test


@settings(max_examples=400, deadline=None)
@given(tree_pairs())
def test_evalb_counts_are_consistent_and_both_readers_agree(pair):
    gold, test = pair
    s = sentence_stats(gold, test)
    assert s.status in (0, 1, 2) and 0 <= s.matched <= min(s.gold, s.test) and s.crossing <= s.test
    if s.status != 0:
        assert s.test == s.matched == s.crossing == 0
    if test == gold:
        assert s.status == 2 or (s.matched == s.gold == s.test and s.crossing == 0)
    texts = [to_bracketed(gold)], [to_bracketed(test)]
    params = EvalbParams(max_error=None)
    by_tree, by_line = evalb([gold], [test], params), evalb_lines(*texts, params)
    assert by_tree.report() == by_line.report() and by_tree.messages == by_line.messages
    figures = by_tree.all.as_dict()
    assert all(v == v and abs(v) != float("inf") for v in figures.values())  # no nan, no inf


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="() aNV\t\0", max_size=30), min_size=1, max_size=3), st.data())
def test_evalb_on_any_lines_scores_or_names_the_line(gold, data):
    test = data.draw(st.lists(st.text(alphabet="() aNV\t", max_size=30), min_size=0, max_size=4))
    try:
        result = evalb_lines(gold, test, COLLINS)
    except StructPrefError as err:
        assert "line " in str(err) or "MAX_ERROR" in str(err)
        return
    assert result.all.sentences <= len(gold) and result.report().endswith("\n")


# ---------------------------------------------------------------- grammar
@settings(max_examples=150, deadline=None)
@given(st.lists(trees(words=["a", "b"]), min_size=1, max_size=5), st.data())
def test_bad_training_trees_are_refused_or_skipped_with_a_count(tree_list, data):
    tree_list = [Tree("TOP", [t]) for t in tree_list]
    bad = sorted(set(data.draw(st.lists(st.integers(0, len(tree_list) - 1), max_size=2))))
    for k in bad:
        how = data.draw(st.sampled_from(["word", "childless", "root"]))
        if how == "word":
            tree_list[k] = Tree("TOP", [Tree("S", ["stray", tree_list[k][0]])])
        elif how == "childless":
            tree_list[k] = Tree("TOP", [Tree("S", [tree_list[k][0], Tree("--", [])])])
        else:
            tree_list[k] = tree_list[k][0]
    if bad:
        with pytest.raises(GrammarError, match=f"tree {bad[0]}: "):
            estimate_grammar(tree_list)
    if len(bad) == len(tree_list):
        with pytest.raises(StructPrefError, match="zero trees"):
            estimate_grammar(tree_list, skip_bad_trees=True)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grammar = estimate_grammar(tree_list, skip_bad_trees=True)
    good = [t for k, t in enumerate(tree_list) if k not in bad]
    assert grammar.skipped_trees == len(bad) and grammar.to_dict() == estimate_grammar(good).to_dict()
