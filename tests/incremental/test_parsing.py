"""The strongly incremental parser (first-pass attachment chained left to
right), against slow references written from its rules: a greedy parser
built from ``extend`` and plain ``TreeSetDAG`` sets, and an exhaustive search
over every sequence of choices."""
import json
import zlib

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.incremental import (ATTACH, LIFT, CPInventory, CPType, candidate_edits,
                                          connection_paths, extend, incremental_trees)
from spacy_structpref.incremental.parsing import MAX_BEAM_WIDTH, IncrementalParser, fallback_edit, flat_parse
from spacy_structpref.trees import SymbolTable, TreeSetDAG

from tests.helpers.strategies import trees

SENT = "(TOP (S (NP (PRP I)) (VP (VBD saw) (NP (DT the) (NN dog))) (. .)))"


def flat(tree) -> str:
    return tree.pformat(margin=10 ** 9)


def tagged(tree: Tree):
    words, tags = zip(*tree.pos())
    return list(words), list(tags)


def zero_scorer(candidates, foot, i):
    return np.zeros(len(candidates))


def hash_scorer(seed: int):
    """Utilities from a hash of each candidate tree: a fixed but arbitrary
    preference, with ties (7 values) to exercise the tie rules."""
    def scorer(candidates, foot, i):
        return np.array([zlib.crc32(f"{seed}|{i}|{flat(t)}".encode()) % 7 for t in candidates], float)
    return scorer


def oracle_scorer(tree: Tree, reduced: bool = False, margin: float = 1.0):
    """Utility ``margin`` for the candidate equal to the gold ``T_{i+1}``, 0
    for the others: the gold tree is interned into the candidates' DAG, so it
    is a candidate exactly when its root is one of the DAG's roots."""
    paths = connection_paths(tree)
    prefixes = incremental_trees(tree, paths)
    gold = {p.word: extend(prefixes[p.word - 1], p.type, p.depth, tree.leaves()[p.word], reduced)
            for p in paths}

    def scorer(candidates, foot, i):
        root = candidates.intern_tree(gold[i])
        return np.array([margin * (r == root) for r in candidates.roots])
    return scorer


def check_parse(parse, words, tags):
    """What every parse satisfies: one TOP-rooted tree over the words in order
    with the input tags, one step per word, counts and score that add up."""
    assert isinstance(parse.tree, Tree) and parse.tree.label() == "TOP"
    assert parse.tree.pos() == list(zip(words, tags))
    assert len(parse.steps) == len(words) and parse.steps[0].kind == "first"
    assert parse.n_fallbacks == sum(s.fallback for s in parse.steps)
    assert parse.score == pytest.approx(sum(s.logp for s in parse.steps), abs=1e-9)
    json.dumps([s.to_dict() for s in parse.steps])  # ready for token._.attachment


def covered(tree: Tree, inventory: CPInventory) -> bool:
    """Every gold CP is in the inventory and nothing but TOP lies above r_n."""
    return (all(p.type in inventory for p in connection_paths(tree))
            and flat(incremental_trees(tree)[-1]) == flat(tree[0]) and len(tree) == 1)


# -- slow references ----------------------------------------------------------
def reference_fallback(prefix: Tree, word: str, tag: str) -> Tree:
    """The documented fallback, written out on a copy: the bare preterminal
    under the parent of the last preterminal, or a FRAG over a lone one."""
    new = Tree(tag, [word])
    if not isinstance(prefix[0], Tree):
        return Tree("FRAG", [prefix.copy(deep=True), new])
    out = prefix.copy(deep=True)
    node = out
    while isinstance(node[-1][0], Tree):
        node = node[-1]
    node.append(new)
    return out


def reference_choices(prefix, word, tag, i, inventory, scorer, reduced, symbols):
    """Every (next tree, edit, utility, logp, set size, fallback) of one word."""
    edits = candidate_edits(prefix, tag, inventory)
    if not edits:
        return [(reference_fallback(prefix, word, tag), None, None, 0.0, 0, True)]
    cands = TreeSetDAG([extend(prefix, cp, d, word, reduced) for cp, d in edits], symbols)
    u = np.asarray(scorer(cands, tag, i), float)
    logp = np.log(np.exp(u - u.max()) / np.exp(u - u.max()).sum())
    return [(extend(prefix, cp, d, word), (cp, d), u[j], logp[j], len(edits), False)
            for j, (cp, d) in enumerate(edits)]


def reference_greedy(words, tags, inventory, scorer, reduced=False):
    tree, steps, score = Tree(tags[0], [words[0]]), [], 0.0
    for i in range(1, len(words)):
        choices = reference_choices(tree, words[i], tags[i], i, inventory, scorer, reduced, SymbolTable())
        best = int(np.argmax([c[2] if c[2] is not None else 0.0 for c in choices]))
        tree, edit, u, logp, n, fallback = choices[best]
        steps.append((edit, u, n, fallback))
        score += logp
    return Tree("TOP", [tree]), steps, score


def reference_all_parses(words, tags, inventory, scorer, limit=400):
    """Every complete parse as (fallbacks, score, tree), or None past ``limit``."""
    parses = [(0, 0.0, Tree(tags[0], [words[0]]))]
    for i in range(1, len(words)):
        parses = [(nf + c[5], s + c[3], c[0]) for nf, s, tree in parses
                  for c in reference_choices(tree, words[i], tags[i], i, inventory, scorer, False,
                                             SymbolTable())]
        if len(parses) > limit:
            return None
    return [(nf, s, Tree("TOP", [t])) for nf, s, t in parses]


# -- by hand ------------------------------------------------------------------
def test_parse_by_hand():
    inventory = CPInventory.from_trees([Tree.fromstring(SENT)])
    words, tags = "I saw the dog .".split(), "PRP VBD DT NN .".split()
    parse = IncrementalParser(inventory, zero_scorer).parse(words, tags)
    check_parse(parse, words, tags)
    assert flat(parse.tree) == SENT and parse.n_fallbacks == 0 and parse.score == 0.0
    assert [(s.kind, s.anchor, s.depth, s.n_alternatives) for s in parse.steps] == [
        ("first", None, 0, 0), (LIFT, "PRP", 0, 1), (ATTACH, "VP", 1, 1), (ATTACH, "NP", 2, 1),
        (ATTACH, "S", 0, 1)]


def test_fallbacks_by_hand():
    inventory = CPInventory.from_trees([Tree.fromstring(SENT)])
    parser = IncrementalParser(inventory, zero_scorer, beam_width=3)
    # NN's only CP attaches to NP, and the frontier S, VP has none: under VP
    parse = parser.parse("I saw dog".split(), "PRP VBD NN".split())
    assert flat(parse.tree) == "(TOP (S (NP (PRP I)) (VP (VBD saw) (NN dog))))"
    assert [s.fallback for s in parse.steps] == [False, False, True] and parse.n_fallbacks == 1
    assert parse.steps[2].cp == CPType(ATTACH, "VP", (), ("NN",)) and parse.steps[2].utility is None
    # unseen tags from the first word on: a FRAG over the first two, then under it
    parse = parser.parse("x y z".split(), "XX YY ZZ".split())
    assert flat(parse.tree) == "(TOP (FRAG (XX x) (YY y) (ZZ z)))" and parse.n_fallbacks == 2
    # an unseen tag mid-sentence, and the inventory takes over again after it
    words, tags = "I saw the xyzzy dog .".split(), "PRP VBD DT UNSEEN NN .".split()
    parse = parser.parse(words, tags)
    check_parse(parse, words, tags)
    assert flat(parse.tree) == ("(TOP (S (NP (PRP I)) (VP (VBD saw) (NP (DT the) (UNSEEN xyzzy) (NN dog)))"
                                " (. .)))")
    assert [s.fallback for s in parse.steps] == [False, False, False, True, False, False]


def test_one_word():
    parse = IncrementalParser(CPInventory({}), zero_scorer).parse(["Hello"], ["UH"])
    check_parse(parse, ["Hello"], ["UH"])
    assert flat(parse.tree) == "(TOP (UH Hello))" and parse.n_fallbacks == 0


def test_fallback_edit_is_an_edit():
    prefix = Tree.fromstring("(S (NP (PRP I)) (VP (VBD saw)))")
    cp, depth = fallback_edit(prefix, "NN")
    assert (cp, depth) == (CPType(ATTACH, "VP", (), ("NN",)), 1)
    assert flat(extend(prefix, cp, depth, "dog")) == flat(reference_fallback(prefix, "dog", "NN"))
    assert fallback_edit(Tree("PRP", ["I"]), "VBD") == (CPType(LIFT, "PRP", ("FRAG",), ("VBD",)), 0)


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_flat_parse_steps_build_the_flat_tree(n):
    """The unsearched parse: the flat (TOP (S ...)) tree, whose steps, each a
    fallback, rebuild it word by word."""
    words, tags = [f"w{i}" for i in range(n)], [f"T{i % 3}" for i in range(n)]
    parse = flat_parse(words, tags)
    tree = Tree(tags[0], [words[0]])
    for word, step in zip(words[1:], parse.steps[1:]):
        tree = extend(tree, step.cp, step.depth, word)
    expected = Tree("TOP", [Tree("S", [Tree(t, [w]) for w, t in zip(words, tags)])])
    assert flat(parse.tree) == flat(expected)
    if n > 1:
        assert flat(Tree("TOP", [tree])) == flat(expected)
    assert parse.steps[0].cp is None and all(step.fallback for step in parse.steps)
    assert parse.n_fallbacks == n == len(parse.steps)


def test_bad_input():
    inventory = CPInventory.from_trees([Tree.fromstring(SENT)])
    parser = IncrementalParser(inventory, zero_scorer)
    for words, tags, match in [([], [], "at least one word"), (["I"], [], "one tag per word"),
                               (["I", "saw"], ["PRP", ""], "needs a tag"),
                               (["I", ""], ["PRP", "VBD"], "non-empty strings")]:
        with pytest.raises(StructPrefError, match=match):
            parser.parse(words, tags)
    for width in (0, -1, 1.5, True, 101, 10 ** 6):
        with pytest.raises(StructPrefError, match="beam_width"):
            IncrementalParser(inventory, zero_scorer, beam_width=width)
    with pytest.raises(StructPrefError, match="CPInventory"):
        IncrementalParser({}, zero_scorer)
    with pytest.raises(StructPrefError, match="callable"):
        IncrementalParser(inventory, None)
    for bad, match in [(lambda c, f, i: np.zeros(len(c) + 1), "one number per candidate"),
                       (lambda c, f, i: np.full(len(c), np.nan), "non-finite"),
                       (lambda c, f, i: ["x"] * len(c), "not numbers")]:
        with pytest.raises(StructPrefError, match=match):
            IncrementalParser(inventory, bad).parse(["I", "saw"], ["PRP", "VBD"])


# -- against the references on random trees -----------------------------------
@settings(max_examples=100, deadline=None)
@given(trees(), trees(), trees(), st.integers(0, 10 ** 6), st.booleans(), st.booleans())
def test_beam_width_one_is_greedy(a, b, c, seed, reduced, perturb):
    inventory = CPInventory.from_trees([b, c])  # a's CPs may be missing: fallbacks happen
    words, tags = tagged(a)
    if perturb:
        tags[len(tags) // 2] = "XX"
    scorer = hash_scorer(seed)
    parse = IncrementalParser(inventory, scorer, beam_width=1, reduced=reduced).parse(words, tags)
    check_parse(parse, words, tags)
    tree, steps, score = reference_greedy(words, tags, inventory, scorer, reduced)
    assert flat(parse.tree) == flat(tree)
    assert [((s.cp, s.depth) if not s.fallback else None, s.utility, s.n_alternatives, s.fallback)
            for s in parse.steps[1:]] == steps
    assert parse.score == pytest.approx(score, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(trees(max_depth=3), trees(max_depth=3), trees(max_depth=3), st.integers(0, 10 ** 6))
def test_exhaustive_beam_is_exact(a, b, c, seed):
    """With room for every parse, the beam holds all of them, and its best is
    the best of the exhaustive reference: fewest fallbacks, then highest
    score; so it is never worse than greedy in that order."""
    inventory = CPInventory.from_trees([a, b, c])
    words, tags = tagged(a)
    scorer = hash_scorer(seed)
    every = reference_all_parses(words, tags, inventory, scorer)
    # small enough to enumerate and to fit the widest beam (each partial parse has an extension: a
    # fallback at worst, so no word has more of them than the last), and ambiguous
    assume(every is not None and 1 < len(every) <= MAX_BEAM_WIDTH)
    beam = IncrementalParser(inventory, scorer, beam_width=MAX_BEAM_WIDTH).beam(words, tags)
    for parse in beam:
        check_parse(parse, words, tags)
    assert sorted(flat(p.tree) for p in beam) == sorted(flat(t) for _, _, t in every)
    best_nf, best_score = min((nf, -s) for nf, s, _ in every)
    assert beam[0].n_fallbacks == best_nf and -beam[0].score == pytest.approx(best_score, abs=1e-9)
    assert [(p.n_fallbacks, -p.score) for p in beam] == sorted((p.n_fallbacks, -p.score) for p in beam)
    greedy = IncrementalParser(inventory, scorer).parse(words, tags)
    assert (beam[0].n_fallbacks, -beam[0].score) <= (greedy.n_fallbacks, -greedy.score + 1e-9)


@settings(max_examples=60, deadline=None)
@given(trees(), trees(), st.integers(0, 10 ** 6), st.integers(2, 4))
def test_beam_keeps_what_greedy_finds(a, b, seed, width):
    """A beam that still holds greedy's parse at the end ranks its best at
    least as high (fewest fallbacks, then score) and scores greedy's parse
    as greedy does."""
    inventory = CPInventory.from_trees([a, b])
    words, tags = tagged(a)
    scorer = hash_scorer(seed)
    greedy = IncrementalParser(inventory, scorer).parse(words, tags)
    beam = IncrementalParser(inventory, scorer, beam_width=width).beam(words, tags)
    assert len(beam) <= width
    same = [p for p in beam if flat(p.tree) == flat(greedy.tree)]
    if same:
        assert same[0].score == pytest.approx(greedy.score, abs=1e-9)
        assert (beam[0].n_fallbacks, -beam[0].score) <= (greedy.n_fallbacks, -greedy.score + 1e-9)


@settings(max_examples=100, deadline=None)
@given(trees(), trees(), st.booleans())
def test_oracle_rebuilds_random_trees(a, b, reduced):
    inventory = CPInventory.from_trees([a, b])
    words, tags = tagged(a)
    gold = flat(Tree("TOP", [incremental_trees(a)[-1]]))
    for width, margin in ((1, 1.0), (3, 100.0)):
        parse = IncrementalParser(inventory, oracle_scorer(a, reduced, margin), width,
                                  reduced).parse(words, tags)
        assert flat(parse.tree) == gold and parse.n_fallbacks == 0


# -- PTB slice ----------------------------------------------------------------
@pytest.fixture(scope="module")
def ptb(ptb_inventory_200):
    return ptb_inventory_200, ptb_trees("dev")[:30]


def test_oracle_rebuilds_covered_ptb_trees(ptb):
    """Greedy with the 0/1 oracle rebuilds every dev tree the inventory
    covers; beam search does with a margin of 100 (with a margin of 1 a path
    that leaves gold for smaller sets can sum to a higher log-probability)."""
    inventory, dev = ptb
    n_covered = 0
    for tree in dev:
        words, tags = tagged(tree)
        ok = covered(tree, inventory)
        n_covered += ok
        for width, margin, reduced in ((1, 1.0, False), (1, 1.0, True), (4, 100.0, True)):
            parse = IncrementalParser(inventory, oracle_scorer(tree, reduced, margin), width,
                                      reduced).parse(words, tags)
            check_parse(parse, words, tags)
            if ok:
                assert flat(parse.tree) == flat(tree) and parse.n_fallbacks == 0
                gold = [(p.type, p.depth) for p in connection_paths(tree)]
                assert [(s.cp, s.depth) for s in parse.steps[1:]] == gold
    assert n_covered >= 5


def test_oracle_rebuilds_every_ptb_tree_with_its_cps(ptb):
    inventory, dev = ptb
    inventory = CPInventory(inventory.counts + CPInventory.from_trees(dev).counts)
    rooted = [t for t in dev if len(t) == 1 and flat(incremental_trees(t)[-1]) == flat(t[0])]
    assert len(rooted) == len(dev)  # no unary chain above r_n in this slice
    for tree in rooted:
        words, tags = tagged(tree)
        parse = IncrementalParser(inventory, oracle_scorer(tree)).parse(words, tags)
        assert flat(parse.tree) == flat(tree)


def test_ptb_fallbacks_and_greedy_reference(ptb):
    inventory, dev = ptb
    for k, tree in enumerate(dev[:10]):
        words, tags = tagged(tree)
        tags[len(tags) // 2] = "UNSEEN"
        scorer = hash_scorer(k)
        parse = IncrementalParser(inventory, scorer).parse(words, tags)
        check_parse(parse, words, tags)
        assert parse.steps[len(tags) // 2].fallback and parse.n_fallbacks >= 1
        ref_tree, ref_steps, ref_score = reference_greedy(words, tags, inventory, scorer)
        assert flat(parse.tree) == flat(ref_tree) and parse.score == pytest.approx(ref_score)
        assert [s.n_alternatives for s in parse.steps[1:]] == [n for _, _, n, _ in ref_steps]
