"""Training and evaluation data for parse reranking: each sentence's k-best
list (and pruned forest) from the parser, scored against the gold tree.

Candidates come from :class:`~spacy_structpref.parsing.Parser` with the
``forest_parser`` component's settings, or from the span-CRF parser of a
trained pipeline, so the lists a reranker learns from are the lists it
reranks in a pipeline. The target of a sentence is the
candidate of highest F1 against the gold tree (Collins & Duffy 2002;
Menchetti et al. 2005, §6.2), counted as EVALB counts
(:mod:`spacy_structpref.scoring.parseval`), ties going to the higher log p.

Training lists are *jackknifed*: a parser that saw a sentence gives it an
unrealistically good list, so the training split is cut into ``n_folds``
folds and each fold is parsed by a grammar read off the other folds
(Collins & Koo 2005 and Charniak & Johnson 2005 use 20 folds), or by a span
CRF trained without it (:func:`fold_lists`). Folds are
contiguous blocks of the corpus order: the PTB sample is in document
order, so a fold holds whole articles and no article's vocabulary leaks
from sibling sentences into the grammar that parses it. Dev and test are
parsed by the grammar of the whole training split.

Sentences the grammar cannot parse get the parser's own fallback (a flat
``(TOP (S tag...))`` tree with log p = -inf, no forest) as their only
candidate and are marked ``fallback``; they stay in the data.
"""
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import srsly
from nltk.tree import Tree

from ..errors import StructPrefError
from ..parsing.settings import build_parser, grammar_from_trees, parser_settings
from ..scoring.parseval import COLLINS, SentenceStats, candidate_stats
from ..saving import atomic_file
from ..trees.arrays import INT, SymbolTable
from ..trees.brackets import parse_bracketed, restore_words, to_bracketed
from ..trees.forest import Forest

# 2: candidates scored as EVALB scores them (punctuation deleted, rejected
# sentences counted as such); a version-1 file's scores are recomputed on load.
FORMAT_VERSION = 2
RESCORED_VERSIONS = (1,)
Sentence = Union[Tree, Sequence[str]]  # a gold tree, or words to parse without gold


def sentence_f1(stats: SentenceStats) -> float:
    """Labelled F1 of one sentence, ``2 matched / (gold + test)`` (= 2PR/(P+R));
    a sentence with no brackets on either side is parsed perfectly, one
    EVALB rejects has F1 0."""
    if not stats.valid:  # EVALB rejected the pair (e.g. the words differ): never a target
        return 0.0
    total = stats.gold + stats.test
    return 2 * stats.matched / total if total else 1.0


def target_index(stats: Sequence[SentenceStats], log_probs: Sequence[float]) -> int:
    """Index of the candidate with the highest F1 against gold; ties go to the
    higher log p, then to the earlier candidate (the parser's order)."""
    if not stats or len(stats) != len(log_probs):
        raise StructPrefError(f"{len(stats)} candidate scores for {len(log_probs)} log-probabilities")
    # Equal F1 ratios give equal floats: 2m/(g+t) is one correctly rounded division of integers.
    return max(range(len(stats)), key=lambda i: (sentence_f1(stats[i]), log_probs[i], -i))


@dataclass
class RerankItem:
    """One sentence for the reranker.

    ``candidates``: bracketed trees best first, as the parser gives them
    (words escaped, see :func:`~spacy_structpref.trees.escape_word`);
    ``log_probs``: their log-probabilities under the grammar; ``forest``: the
    pruned forest (if asked for); ``fallback``: the grammar could not parse
    the sentence; ``fold``: the jackknife fold that parsed it (-1: the grammar
    of the whole training split). With a gold tree, ``stats[i]`` holds
    candidate i's EVALB counts against it (matched, gold and test brackets,
    crossing brackets, length) and ``target`` the index of the best candidate
    (:func:`target_index`)."""
    words: List[str]
    candidates: List[str]
    log_probs: List[float]
    gold: Optional[Tree] = None
    forest: Optional[Forest] = None
    fallback: bool = False
    fold: int = -1
    stats: Optional[List[SentenceStats]] = None
    target: Optional[int] = None

    def __post_init__(self):
        if not self.candidates or len(self.candidates) != len(self.log_probs):
            raise StructPrefError(f"a rerank item needs candidates with one log-probability each, got "
                                  f"{len(self.candidates)} candidates and {len(self.log_probs)} log-probabilities")
        if self.gold is not None and self.stats is None:
            # Escaped gold: candidates carry escaped words and EVALB compares words.
            self.stats = candidate_stats(parse_bracketed(to_bracketed(self.gold)), self.candidates, COLLINS)
        if self.stats is not None and self.target is None:
            self.target = target_index(self.stats, self.log_probs)

    def __len__(self) -> int:
        return len(self.candidates)

    def tree(self, i: int) -> Tree:
        """Candidate i as an nltk Tree with the sentence's own words."""
        return restore_words(parse_bracketed(self.candidates[i]), self.words)

    def f1(self) -> np.ndarray:
        """Each candidate's F1 against gold (fractions in [0, 1])."""
        if self.stats is None:
            raise StructPrefError("this item has no gold tree: there is no F1 to compute")
        return np.array([sentence_f1(s) for s in self.stats])

    # ------------------------------------------------------- serialisation
    def to_dict(self) -> dict:
        """msgpack-serialisable form (no pickle): trees as bracketed strings,
        the forest as :meth:`Forest.to_dict`."""
        return {
            "words": list(self.words), "candidates": list(self.candidates),
            "log_probs": [float(x) for x in self.log_probs],
            "gold": to_bracketed(self.gold) if self.gold is not None else None,
            "forest": self.forest.to_dict() if self.forest is not None else None,
            "fallback": self.fallback, "fold": self.fold,
            "stats": [list(astuple(s)) for s in self.stats] if self.stats is not None else None,
            "target": self.target,
        }

    @classmethod
    def from_dict(cls, data: dict, symbols: SymbolTable = None, rescore: bool = False) -> "RerankItem":
        """Inverse of :meth:`to_dict`; forests are read against ``symbols``
        (give all items of a data set the same table). ``rescore``: the
        stored scores and target are recomputed from gold."""
        words = list(data["words"])
        gold = restore_words(parse_bracketed(data["gold"]), words) if data["gold"] is not None else None
        forest = None
        if data["forest"] is not None:
            forest = Forest.from_dict(data["forest"], symbols if symbols is not None else SymbolTable())
        stats, target = None, None
        if data["stats"] is not None and not rescore:
            stats, target = [SentenceStats(*s) for s in data["stats"]], data["target"]
        return cls(words, list(data["candidates"]), list(data["log_probs"]), gold, forest,
                   bool(data["fallback"]), int(data["fold"]), stats, target)


def count_fallbacks(items: Iterable[RerankItem]) -> int:
    """How many sentences got the parser's flat fallback tree."""
    return sum(item.fallback for item in items)


# ------------------------------------------------------------------ parsers
def parser_from_trees(trees: Sequence[Tree], settings: Optional[dict] = None):
    """The parser ``forest_parser`` builds from these training trees and
    settings (:func:`~spacy_structpref.parsing.parser_settings`): the same
    grammar (annotation, lexicon) and search settings."""
    cfg = parser_settings(settings)
    if cfg["tag_mode"] != "ignore":
        # Lists are parsed from words alone; gold tags would flatter them.
        raise StructPrefError(f"rerank lists are parsed from words only: tag_mode must be 'ignore', "
                              f"got {cfg['tag_mode']!r}")
    return build_parser(grammar_from_trees(trees, cfg), cfg)


def fold_assignment(n: int, n_folds: int) -> np.ndarray:
    """Fold id of each of n sentences: ``n_folds`` contiguous blocks whose
    sizes differ by at most one."""
    if n_folds < 2:
        raise StructPrefError(f"jackknifing needs at least 2 folds, got {n_folds}")
    if n < n_folds:
        raise StructPrefError(f"cannot cut {n} sentences into {n_folds} folds")
    return (np.arange(n) * n_folds) // n


# ------------------------------------------------------------------ parsing
Part = Tuple[List[RerankItem], List[Optional[Forest]], SymbolTable]


def parse_part(parser, sentences: Sequence[Sentence], k: int, with_forest: bool, fold: int) -> Part:
    """Items without their forests, the forests, and the table they are
    interned in: a worker's forests cross to the parent with one copy of its
    parser's table, to be moved into the data set's table there."""
    items, forests = [], []
    for sent in sentences:
        gold, words = (sent, sent.leaves()) if isinstance(sent, Tree) else (None, [str(w) for w in sent])
        res = parser.parse(words, k=k, with_forest=with_forest)
        items.append(RerankItem(words, [text for _, text in res.nbest], [lp for lp, _ in res.nbest], gold,
                                None, res.fallback, fold))
        forests.append(res.forest)
    return items, forests, parser.symbols


def _jackknife_fold(fold: int, train: List[Tree], held_out: List[Tree], settings: dict, k: int,
                    with_forest: bool) -> Part:
    return parse_part(parser_from_trees(train, settings), held_out, k, with_forest, fold)


def _move_forests(forests: Sequence[Optional[Forest]], source: SymbolTable,
                  symbols: SymbolTable) -> List[Optional[Forest]]:
    """The forests, interned in ``source``, re-interned in ``symbols``: their
    labels and the productions they use get ``symbols``' ids (word tails
    are token positions and stay)."""
    present = [f for f in forests if f is not None]
    if not present:
        return list(forests)
    label_map = np.array(symbols.label_ids(source.labels), dtype=INT)
    used = np.unique(np.concatenate([f.rule for f in present])).tolist()
    keys, offsets = [], [0]
    for r in used:
        label, kids = source.productions[r]
        keys.append(label_map[label])
        keys.extend(label_map[c] if c >= 0 else -(symbols.word_id(source.words[-c - 1]) + 1) for c in kids)
        offsets.append(len(keys))
    rule_map = np.full(len(source.productions), -1, dtype=INT)
    rule_map[used] = symbols.production_ids(np.array(keys, dtype=np.int64), np.array(offsets, dtype=np.int64))
    return [None if f is None else
            Forest(label_map[f.label], f.start, f.end, f.head, f.tail_start, f.tails, rule_map[f.rule], f.prob,
                   f.root, f.n_words, symbols, state=f.state)
            for f in forests]


def assemble_parts(parts: List[Part], symbols: Optional[SymbolTable]) -> List[RerankItem]:
    """The parts' items in order, all forests in one table."""
    symbols = symbols if symbols is not None else SymbolTable()
    out = []
    for items, forests, source in parts:
        for item, forest in zip(items, _move_forests(forests, source, symbols)):
            item.forest = forest
            out.append(item)
    return out


def _run(fn, tasks: List[tuple], sizes: List[int], n_jobs: Optional[int], progress: bool, desc: str) -> List[Part]:
    """``fn(*task)`` for each task, in ``n_jobs`` worker processes (None: one
    per core; 1: in this process); results in task order. ``sizes``: the
    sentences of each task, for the progress bar."""
    from ..progress import progress_bar

    if n_jobs is not None and n_jobs < 1:
        raise StructPrefError(f"n_jobs must be at least 1, got {n_jobs}")
    n_jobs = min(n_jobs or os.cpu_count() or 1, len(tasks))
    results: List[Optional[Part]] = [None] * len(tasks)
    with progress_bar(total=sum(sizes), desc=desc, unit="sent", disable=not progress) as bar:
        if n_jobs == 1:
            for i, task in enumerate(tasks):
                results[i] = fn(*task)
                bar.update(sizes[i])
        else:
            with ProcessPoolExecutor(n_jobs) as pool:
                futures = {pool.submit(fn, *task): i for i, task in enumerate(tasks)}
                for future in as_completed(futures):
                    i = futures[future]
                    results[i] = future.result()
                    bar.update(sizes[i])
    return results


def check_k(k: int) -> int:
    """``k``, the length of a k-best list, if at least 1; an error otherwise."""
    if k < 1:
        raise StructPrefError(f"k must be at least 1, got {k}")
    return k


def parse_lists(sentences: Sequence[Sentence], parser, k: int = 50, with_forest: bool = False,
                n_jobs: Optional[int] = 1, progress: bool = False,
                symbols: SymbolTable = None) -> List[RerankItem]:
    """Rerank items for ``sentences`` (gold trees, or word lists without gold),
    in order, parsed by ``parser`` (for dev and test: :func:`parser_from_trees`
    of the whole training split). ``n_jobs`` worker processes (None: one per
    core) parse contiguous chunks; all forests share the table ``symbols``."""
    sentences = list(sentences)
    k = check_k(k)
    if not sentences:
        return []
    n_chunks = min(len(sentences), 4 * (n_jobs or os.cpu_count() or 1))  # small chunks balance the workers
    bounds = np.linspace(0, len(sentences), n_chunks + 1).astype(int).tolist()
    chunks = [sentences[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    tasks = [(parser, chunk, k, with_forest, -1) for chunk in chunks]
    return assemble_parts(_run(parse_part, tasks, [len(c) for c in chunks], n_jobs, progress, "parse"), symbols)


def jackknife_lists(train_trees: Sequence[Tree], settings: Optional[dict] = None, n_folds: int = 10,
                    k: Optional[int] = None, with_forest: bool = False, n_jobs: Optional[int] = None,
                    progress: bool = True, symbols: SymbolTable = None) -> List[RerankItem]:
    """One rerank item per training tree, in order, each parsed by the
    grammar of the other folds (:func:`fold_assignment`). ``settings``:
    ``forest_parser`` settings (``k`` defaults to theirs). Folds run in
    ``n_jobs`` worker processes (None: one per core); all forests share the
    table ``symbols``."""
    trees = list(train_trees)
    if not all(isinstance(t, Tree) for t in trees):
        raise StructPrefError("jackknifing needs gold trees (nltk Trees) for every training sentence")
    cfg = parser_settings(settings)
    k = check_k(cfg["k"] if k is None else k)
    folds = fold_assignment(len(trees), n_folds).tolist()
    tasks, sizes = [], []
    for f in range(n_folds):
        held = [t for t, g in zip(trees, folds) if g == f]
        tasks.append((f, [t for t, g in zip(trees, folds) if g != f], held, cfg, k, with_forest))
        sizes.append(len(held))
    return assemble_parts(_run(_jackknife_fold, tasks, sizes, n_jobs, progress, "jackknife"), symbols)


def fold_lists(train_trees: Sequence[Tree], fold_parsers: Sequence, k: int = 50, with_forest: bool = False,
               progress: bool = True, symbols: SymbolTable = None) -> List[RerankItem]:
    """One rerank item per training tree, in order, jackknifed with parsers
    trained elsewhere: ``fold_parsers[f]`` (anything with the parsers'
    ``parse(words, k, with_forest)``, e.g. a span CRF trained by ``spacy
    train`` without fold f) parses fold f of :func:`fold_assignment`, in
    this process; all forests share the table ``symbols``."""
    trees = list(train_trees)
    if not all(isinstance(t, Tree) for t in trees):
        raise StructPrefError("jackknifing needs gold trees (nltk Trees) for every training sentence")
    k = check_k(k)
    folds = fold_assignment(len(trees), len(fold_parsers)).tolist()
    tasks = [(parser, [t for t, g in zip(trees, folds) if g == f], k, with_forest, f)
             for f, parser in enumerate(fold_parsers)]
    return assemble_parts(_run(parse_part, tasks, [len(t[1]) for t in tasks], 1, progress, "jackknife"), symbols)


# ------------------------------------------------------------------ saving
def save_items(path, items: Sequence[RerankItem]) -> None:
    """Write items to one msgpack file (:meth:`RerankItem.to_dict`),
    atomically: an interrupted save leaves an older file as it was."""
    with atomic_file(path) as tmp:
        srsly.write_msgpack(tmp, {"version": FORMAT_VERSION, "items": [item.to_dict() for item in items]})


def load_items(path, symbols: SymbolTable = None) -> List[RerankItem]:
    """Items written by :func:`save_items`; forests are read into ``symbols``
    (default: one new table for all of them). The scores of an older
    format's items are recomputed from their gold trees."""
    path = Path(path)
    if not path.exists():
        raise StructPrefError(f"no rerank data at {path}")
    data = srsly.read_msgpack(path)
    version = data.get("version") if isinstance(data, dict) else None
    if version != FORMAT_VERSION and version not in RESCORED_VERSIONS:
        raise StructPrefError(f"{path} is not rerank data of format version {FORMAT_VERSION}")
    symbols = symbols if symbols is not None else SymbolTable()
    rescore = version != FORMAT_VERSION
    return [RerankItem.from_dict(d, symbols, rescore) for d in data["items"]]
