"""Incremental trees, connection paths, preference sets (Menchetti et al. 2005,
§6.1), against hand-worked sentences and slow references written from the
definitions."""
import pytest
from hypothesis import given, settings
from nltk.tree import Tree

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.incremental import (ATTACH, FOOT_CLASSES, LIFT, OTHERS, CandidateSets, CPInventory,
                                          CPType, KeptSet, PreferenceSet, SetCache, candidate_dag, candidate_edits,
                                          connection_paths, extend, foot_class, incremental_trees, preference_sets)
from spacy_structpref.trees import SymbolTable, TreeSetDAG

from tests.helpers.strategies import trees

SENT = "(TOP (S (NP (PRP I)) (VP (VBD saw) (NP (DT the) (NN dog))) (. .)))"


def flat(tree) -> str:
    return tree.pformat(margin=10 ** 9) if isinstance(tree, Tree) else tree


# -- slow references written from the definitions (Menchetti et al. 2005, §6.1) --
def reference_prefix(tree: Tree, i: int) -> Tree:
    """T_i: under r_i (lowest common ancestor of the first i preterminals),
    every node dominating one of w_1..w_i."""
    pre = [p[:-1] for p in tree.treepositions("leaves")][:i]
    ancestors = [{p[:k] for k in range(len(p) + 1)} for p in pre]
    r = max(set.intersection(*ancestors), key=len)

    def cut(node, start):
        if not isinstance(node, Tree):
            return (node if start < i else None), start + 1
        kids = []
        for child in node:
            kept, start_after = cut(child, start)
            if kept is not None:
                kids.append(kept)
            start = start_after
        return (Tree(node.label(), kids) if kids else None), start

    first = next(k for k, p in enumerate(tree.treepositions("leaves")) if p[:len(r)] == r)
    return cut(tree[r], first)[0]


def subtrees_with_positions(tree):
    return [(p, tree[p]) for p in tree.treepositions() if isinstance(tree[p], Tree)]


def reference_candidates(prefix: Tree, word: str, foot: str, inventory: CPInventory):
    """Brute force over every node, not just the right frontier: a candidate is
    any inventory CP with this foot joined so that the words stay in order with
    the new word last (attach under any node with the anchor label, lift over
    a root with the anchor label)."""
    words = prefix.leaves()
    out = set()
    for cp in inventory.types(foot):
        if cp.kind == LIFT:
            if prefix.label() == cp.anchor:
                left = prefix.copy(deep=True)
                for label in reversed(cp.spine[1:]):
                    left = Tree(label, [left])
                chain = Tree.fromstring(_chain_string(cp.chain, word))
                out.add(flat(Tree(cp.spine[0], [left, chain])))
            continue
        for pos, node in subtrees_with_positions(prefix):
            if node.label() != cp.anchor or not isinstance(node[0], Tree):
                continue  # preterminals take no new child
            for at in range(len(node) + 1):
                cand = prefix.copy(deep=True)
                cand[pos].insert(at, Tree.fromstring(_chain_string(cp.chain, word)))
                if cand.leaves() == words + [word]:
                    out.add(flat(cand))
    return out


def _indexed(tree: Tree) -> Tree:
    out = tree.copy(deep=True)
    for k, pos in enumerate(out.treepositions("leaves")):
        out[pos] = f"w{k}"
    return out


def _chain_string(labels, word):
    return "".join(f"({label} " for label in labels) + word + ")" * len(labels)


# -- hand-worked sentence -----------------------------------------------------
def test_connection_paths_by_hand():
    paths = connection_paths(Tree.fromstring(SENT))
    assert [(p.word, p.depth) for p in paths] == [(1, 0), (2, 1), (3, 2), (4, 0)]
    assert [p.type for p in paths] == [
        CPType(LIFT, "PRP", ("S", "NP"), ("VP", "VBD")),
        CPType(ATTACH, "VP", (), ("NP", "DT")),
        CPType(ATTACH, "NP", (), ("NN",)),
        CPType(ATTACH, "S", (), (".",)),
    ]
    assert str(paths[0].type) == "lift PRP: (S (NP (PRP …)) (VP (VBD ·)))"
    assert str(paths[1].type) == "attach to VP: (NP (DT ·))"


def test_incremental_trees_by_hand():
    got = [flat(t) for t in incremental_trees(Tree.fromstring(SENT))]
    assert got == [
        "(PRP I)",
        "(S (NP (PRP I)) (VP (VBD saw)))",
        "(S (NP (PRP I)) (VP (VBD saw) (NP (DT the))))",
        "(S (NP (PRP I)) (VP (VBD saw) (NP (DT the) (NN dog))))",
        "(S (NP (PRP I)) (VP (VBD saw) (NP (DT the) (NN dog))) (. .))",
    ]


def test_lift_over_a_left_recursion():
    # "the dog 's owner": NP over NP, a lift with a one-node spine at word 3
    tree = Tree.fromstring("(NP (NP (DT the) (NN dog) (POS 's)) (NN owner))")
    paths = connection_paths(tree)
    assert [p.type.kind for p in paths] == [LIFT, ATTACH, LIFT]
    assert paths[2].type == CPType(LIFT, "NP", ("NP",), ("NN",))


def test_reduction_by_hand():
    tree = Tree.fromstring(SENT)
    inventory = CPInventory.from_trees([tree])
    last = preference_sets(tree, inventory)[-1]
    assert [flat(t) for t in last.trees(reduced=True)] == [
        "(S NP (VP VBD (NP DT (NN dog))) (. .))"]
    assert [flat(t) for t in last.trees()] == [flat(tree[0])]


def test_candidates_by_hand():
    inventory = CPInventory.from_trees([
        Tree.fromstring(SENT),
        Tree.fromstring("(TOP (S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (PRP me)))))")])
    prefix = incremental_trees(Tree.fromstring(SENT))[2]  # (S (NP (PRP I)) (VP (VBD saw) (NP (DT the))))
    edits = candidate_edits(prefix, "NN", inventory)
    # attach to NP at depth 2 (the only NP on the frontier); lift over S is not in the inventory
    assert edits == [(CPType(ATTACH, "NP", (), ("NN",)), 2)]
    assert candidate_edits(prefix, "XX", inventory) == []


def test_gold_missing_from_inventory_is_kept_as_error():
    tree = Tree.fromstring(SENT)
    inventory = CPInventory.from_trees([Tree.fromstring("(S (NP (PRP I)) (VP (VBD saw)))")])
    sets = preference_sets(tree, inventory)
    assert len(sets) == 4
    assert sets[0].gold == 0 and all(s.gold is None for s in sets[1:])


# -- against the references ---------------------------------------------------
def _check_against_references(tree: Tree, inventory: CPInventory):
    n = len(tree.leaves())
    got = incremental_trees(tree)
    assert [flat(t) for t in got] == [flat(reference_prefix(tree, i)) for i in range(1, n + 1)]
    for pset in preference_sets(tree, inventory):
        candidates = [flat(t) for t in pset.trees()]
        assert len(set(candidates)) == len(candidates)  # no duplicate trees
        # the reference tells words apart by their order: give them distinct names
        indexed, new_word = _indexed(pset.prefix), f"w{pset.word}"
        assert {flat(extend(indexed, cp, depth, new_word)) for cp, depth in pset.edits} == \
            reference_candidates(indexed, new_word, pset.foot, inventory)
        if pset.gold is not None:
            assert candidates[pset.gold] == flat(got[pset.word])
        reduced = pset.trees(reduced=True)
        assert all(len(r.treepositions()) <= len(t.treepositions())
                   for r, t in zip(reduced, pset.trees()))




@settings(max_examples=100, deadline=None)
@given(trees())
def test_gold_cps_rebuild_the_tree(tree):
    # T_n is the whole tree minus what lies above its lowest common ancestor
    got = incremental_trees(tree)[-1]
    n = len(tree.leaves())
    assert flat(got) == flat(reference_prefix(tree, n))
    assert got.leaves() == tree.leaves()


# -- candidate sets built straight into a DAG --------------------------------
def _dag_key(dag: TreeSetDAG):
    """What two candidate DAGs must share to be the same: nodes, roots and trees."""
    return dag.productions, dag.children, dag.roots, list(dag)


def _check_dag_sets(tree: Tree, inventory: CPInventory):
    """``PreferenceSet.dag`` is node for node the hash-consed candidate trees."""
    symbols = SymbolTable()  # shared, so production ids agree whichever side interns first
    for pset in preference_sets(tree, inventory):
        for reduced in (True, False):
            got, cands = pset.dag(symbols, reduced), pset.trees(reduced)
            expected = TreeSetDAG(cands, symbols)
            assert (got.productions, got.children, got.roots, got.occurrences) == \
                (expected.productions, expected.children, expected.roots, expected.occurrences)
            assert list(got) == cands
            again = TreeSetDAG.from_arrays(symbols, *got.to_arrays())
            assert (again.productions, again.children, again.roots, again.occurrences) == \
                (expected.productions, expected.children, expected.roots, expected.occurrences)
            assert list(again) == cands
            # interning into the rebuilt DAG finds the nodes it has
            assert [again.intern(p, k) for p, k in zip(got.productions, got.children)] == list(range(len(got.productions)))


def _check_kept_sets(tree: Tree, inventory: CPInventory):
    """CandidateSets with ``keep`` gives, at every access, the DAG a fresh build gives."""
    symbols = SymbolTable()
    psets = preference_sets(tree, inventory)
    built, kept = CandidateSets(psets, symbols, reduced=True), CandidateSets(psets, symbols, reduced=True, keep=True)
    for _ in range(2):  # the first access builds and keeps, the second rebuilds from the kept arrays
        for i in range(len(psets)):
            assert _dag_key(built[i]) == _dag_key(kept[i])
    part = kept[1:]
    assert part.keep and len(part) == len(psets[1:])
    assert [part[i].roots for i in range(len(part))] == [built[i].roots for i in range(1, len(psets))]


def _same_sets(got, expected, symbols):
    assert [(s.word, s.foot, s.gold, len(s)) for s in got] == [(s.word, s.foot, s.gold, len(s)) for s in expected]
    for s, e in zip(got, expected):
        assert _dag_key(s.dag(symbols, True)) == _dag_key(e.dag(symbols, True))


def _check_set_cache(tree: Tree, inventory: CPInventory):
    """A SetCache gives a tree's sets as preference_sets builds them, with
    the same ids at every call, kept or (no room) built again."""
    symbols = SymbolTable()
    fresh = preference_sets(tree, inventory)
    for max_bytes in (1 << 30, 0):
        cache = SetCache(inventory, symbols, reduced=True, max_bytes=max_bytes)
        first, ids = cache.sets([tree])
        again, ids_again = cache.sets([tree])
        assert ids == ids_again == [(0, s.word) for s in fresh]
        _same_sets(first, fresh, symbols)
        _same_sets(again, fresh, symbols)
        assert all(isinstance(s, KeptSet if max_bytes else PreferenceSet) for s in first + again)
        assert (cache.nbytes > 0) == (bool(max_bytes) and bool(fresh))


# Each check on random trees (inventory from the same trees) and on PTB dev trees (inventory from train).
CHECKS = [_check_against_references, _check_dag_sets, _check_kept_sets, _check_set_cache]


@pytest.mark.parametrize("check", CHECKS)
@settings(max_examples=150, deadline=None)
@given(a=trees(), b=trees(), c=trees())
def test_random_trees(check, a, b, c):
    inventory = CPInventory.from_trees([a, b, c])
    for tree in (a, b, c):
        check(tree, inventory)


@pytest.mark.parametrize("check", CHECKS)
def test_ptb_dev_trees(check, ptb_inventory_200):
    for tree in ptb_trees("dev")[:15]:
        check(tree, ptb_inventory_200)


def test_set_cache_keeps_trees_while_they_fit_and_numbers_every_tree(ptb_inventory_200):
    a, b, c = ptb_trees("dev")[:3]
    symbols = SymbolTable()
    probe = SetCache(ptb_inventory_200, symbols, True)
    probe.sets([a])
    cache = SetCache(ptb_inventory_200, symbols, True, max_bytes=probe.nbytes)  # room for a's sets only
    sets, ids = cache.sets([a, b, a, c, b])
    assert cache.nbytes == probe.nbytes and cache.full
    trees, numbers = (a, b, a, c, b), (0, 1, 0, 2, 1)  # a tree coming again has its number
    assert ids == [(n, s.word) for n, t in zip(numbers, trees) for s in preference_sets(t, ptb_inventory_200)]
    kinds = [type(s) for s in sets]
    assert set(kinds[:len(a.leaves()) - 1]) == {KeptSet} and PreferenceSet in kinds
    _same_sets(sets, [s for t in trees for s in preference_sets(t, ptb_inventory_200)], symbols)
    assert cache.serves(ptb_inventory_200, symbols, True)
    assert not cache.serves(ptb_inventory_200, SymbolTable(), True)
    assert not cache.serves(ptb_inventory_200, symbols, False)
    assert not cache.serves(CPInventory.from_trees([a]), symbols, True)
    with pytest.raises(StructPrefError, match="SymbolTable and with the reduction"):
        sets[0].dag(SymbolTable(), True)
    with pytest.raises(StructPrefError, match="SymbolTable and with the reduction"):
        sets[0].dag(symbols, False)
    with pytest.raises(StructPrefError, match="max_bytes must be an integer"):
        SetCache(ptb_inventory_200, symbols, True, max_bytes=-1)


def test_candidate_dag_needs_no_gold():
    """What an incremental parser does on new text: the prefix it has built,
    a word and its tag, every edit the inventory allows, no gold tree."""
    train = [Tree.fromstring(SENT)] + ptb_trees("train")[:50]
    inventory = CPInventory.from_trees(train)
    symbols = SymbolTable()
    prefix = incremental_trees(Tree.fromstring(SENT))[1]
    for token, tag in [("the", "DT"), ("old", "JJ"), ("of", "IN"), ("ran", "VBD")]:
        edits = candidate_edits(prefix, tag, inventory)
        assert edits
        for reduced in (True, False):
            got = candidate_dag(prefix, token, edits, symbols, reduced)
            assert list(got) == [extend(prefix, cp, d, token, reduced) for cp, d in edits]
    assert len(candidate_dag(prefix, "x", [], symbols)) == 0


@pytest.mark.parametrize("reduced", [True, False])
def test_an_edit_given_twice_shares_its_nodes(reduced):
    """Candidates repeated (the same edit twice, in any order) are hash-consed
    as the trees would be: one root for both, no node twice."""
    train = [Tree.fromstring(SENT)] + ptb_trees("train")[:50]
    inventory = CPInventory.from_trees(train)
    symbols = SymbolTable()
    prefix = incremental_trees(Tree.fromstring(SENT))[2]
    edits = candidate_edits(prefix, "NN", inventory)
    assert len(edits) > 2
    twice = [list(e) for e in edits[:2]] + edits + [edits[0]]  # lists, as decoded JSON gives them
    got = candidate_dag(prefix, "dog", twice, symbols, reduced)
    expected = TreeSetDAG([extend(prefix, cp, d, "dog", reduced) for cp, d in twice], symbols)
    assert _dag_key(got) == _dag_key(expected)
    assert got.roots[0] == got.roots[2] == got.roots[-1] and len(set(got.roots)) == len(edits)


def test_inventory_counts_and_round_trip():
    tree = Tree.fromstring(SENT)
    inventory = CPInventory.from_trees([tree, tree])
    assert len(inventory) == 4
    assert set(inventory.counts.values()) == {2}
    again = CPInventory.from_json(inventory.to_json())
    assert again.counts == inventory.counts and again.by_foot == inventory.by_foot
    with pytest.raises(StructPrefError, match="not a CP inventory"):
        CPInventory.from_json('[["attach", "NP"]]')


def test_bad_input():
    with pytest.raises(StructPrefError, match="at least one word"):
        connection_paths(Tree("S", []))
    with pytest.raises(StructPrefError, match="tagged words"):
        connection_paths(Tree.fromstring("(S (NP a b))"))
    with pytest.raises(StructPrefError, match="kind"):
        CPType("hang", "NP", (), ("NN",))
    with pytest.raises(StructPrefError, match="spine exactly for a lift"):
        CPType(LIFT, "NP", (), ("NN",))
    prefix = Tree.fromstring("(S (NP (PRP I)) (VP (VBD saw)))")
    with pytest.raises(StructPrefError, match="does not fit"):
        extend(prefix, CPType(ATTACH, "PP", (), ("IN",)), 1, "of")
    with pytest.raises(StructPrefError, match="no anchor at depth 2"):
        extend(prefix, CPType(ATTACH, "VBD", (), ("IN",)), 2, "of")
    bad = PreferenceSet(prefix, 2, "of", "IN", [(CPType(LIFT, "NP", ("S",), ("IN",)), 0)], None)
    with pytest.raises(StructPrefError, match="does not fit"):
        bad.dag(SymbolTable())


def test_foot_classes_cover_the_ptb_tags():
    tags = {tag for tree in ptb_trees("train") for _, tag in tree.pos()}
    classes = {tag: foot_class(tag) for tags_ in FOOT_CLASSES.values() for tag in tags_}
    assert len(classes) == sum(len(v) for v in FOOT_CLASSES.values())  # no tag in two classes
    others = sorted(t for t in tags if foot_class(t) == OTHERS)
    assert others == ["CD", "EX", "FW", "LS", "SYM", "UH", "WP"]
    assert foot_class("NN") == "Nouns" and foot_class("TO") == "Prepositions"
