"""Question classification on TREC (Li & Roth 2002; NLTK's ``qc``: 5,452
training and 500 test questions, 6 coarse and 50 fine classes) with
one-vs-others kernel SVMs over parses: Zhang et al. (2010)'s experiment
(§4, the forest kernel against the tree kernel in an SVM) on the classic
tree-kernel classification benchmark (Zhang & Lee 2003).

1. Parses: every question parsed once by the trained ``forest_parser``
   (``--parser``; the project's ``train-forest-parser``, PTB sample): the
   1-best tree and the packed forest, pruned as the reranker's
   (``merit_threshold``), cached under ``--cache`` (reruns read them).
2. Systems, each trained on the 5,452 training questions with its settings
   chosen on the dev split (every 10th training question; never on test),
   then refit on all 5,452: a linear SVM on word uni+bigrams (scikit-learn
   ``LinearSVC``, C on dev); spaCy's ``textcat`` with its bag-of-words and
   ensemble architectures (epochs on dev, then retrained on all); and the
   ``kernel_textcat`` classifier (``SVC(kernel="precomputed")`` one vs.
   others, C on dev) with the subset-tree kernel over the 1-best tree, the
   forest kernel over the pruned forest, the tempered forest kernel (α on
   dev, chosen on the first ``--alpha-size`` training questions), and the
   composites of each structure kernel with the BOW kernel (weight on dev);
   then both structure kernels with word-class nodes (Plank & Moschitti
   2013) of k-means clusters of the static vectors ``--vectors`` (the
   project's ``train-vectors``), k chosen on dev with the tree kernel from
   ``--cluster-grid``, alone and with the BOW kernel (weight on dev).
3. The table: accuracy and macro F (spaCy's ``cats_score``) for coarse and
   fine classes, per-class P/R/F for the coarse classes; the Gram matrices'
   times (forest and tree kernel, one run, ``--n-threads`` threads) and the
   prediction time of the 500 test questions (kernel rows against the
   support vectors only); last, ``forest - tree, coarse accuracy: +X.XX``.

    NLTK_DATA=../shared/nltk_data python bench/textcat.py [--train-size N] [--json metrics/textcat.json]

``--parse-only`` builds the cache and stops; ``--max-steps N`` (N > 0) is a
smoke run: N training and N test questions, no spaCy training beyond one epoch.
"""
import argparse
import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import spacy
import srsly
from wasabi import msg

from spacy_structpref.classification.classifier import KernelClassifier
from spacy_structpref.classification.data import gold_label, load_parsed, parse_questions
from spacy_structpref.classification.kernels import (BowDocKernel, ForestDocKernel, SumDocKernel, TreeDocKernel,
                                                     count_vectors, ngram_features)
from spacy_structpref.models.word_vectors import vectors_digest
from spacy_structpref.classification.svm import dev_mask
from spacy_structpref.corpora.labels import coarse_label

DEFAULT_C_GRID = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
ALPHAS = (0.5, 2.0)  # the tempered forest kernel's dev grid (α = 1 is the forest kernel)
BOW_WEIGHTS = (0.3, 0.5, 0.7)  # the composites' dev grid (0.8, 0.9: no better on coarse dev)
# the subset-tree decay λ of the tree and forest kernels (--lam); on coarse dev (C on dev,
# 0.1 / 0.2 / 0.4 / 0.6): the tree kernel 86.06 / 85.87 / 85.50 / 81.28, tree + BOW (0.5)
# 88.44 / 88.44 / 89.36 / 88.44: smaller λ helps the tree kernel alone, not the composite;
# the forest kernel at 0.2 / 0.4: 87.16 / 87.34, forest + BOW (0.7) 88.62 / 89.17
DEFAULT_LAM = 0.4
GRANULARITIES = ("coarse", "fine")


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def labelled(docs, granularity):
    gold = [gold_label(d) for d in docs]
    return gold if granularity == "fine" else [coarse_label(g) for g in gold]


def scores(gold, pred, labels):
    """spaCy's textcat scores (Scorer.score_cats, exclusive classes) and accuracy, from label lists."""
    from spacy.tokens import Doc
    from spacy.training import Example
    from spacy.vocab import Vocab

    from spacy_structpref.classification.registrations import score_textcat

    vocab = Vocab()
    examples = []
    for g, p in zip(gold, pred):
        ref, hyp = Doc(vocab, words=["x"]), Doc(vocab, words=["x"])
        ref.cats = {label: float(label == g) for label in labels}
        hyp.cats = {label: float(label == p) for label in labels}
        examples.append(Example(hyp, ref))
    s = score_textcat(examples, labels=labels)
    return {"accuracy": 100 * s["cats_accuracy"], "macro_f": 100 * s["cats_macro_f"],
            "per_class": {k: {m: 100 * v[m] for m in ("p", "r", "f")} for k, v in s["cats_f_per_type"].items()}}


class Grams:
    """Gram matrices cached as .npy under ``root`` (keyed by the kernel's
    settings and the items), each with a .json of how long it took to
    compute (and the load then), so that a rerun reports the measured time."""

    def __init__(self, root: Path, tag: str):
        self.root, self.tag = root, tag

    def get(self, name, settings, compute):
        """``(K, timing)``: timing ``{"secs", "load", "cached"}``."""
        key = hashlib.sha256(json.dumps([self.tag, name, settings], sort_keys=True).encode()).hexdigest()[:16]
        path = self.root / f"{name}-{key}.npy"
        side = path.with_suffix(".json")
        if path.exists():
            timing = srsly.read_json(side) if side.exists() else {"secs": None, "load": None}
            return np.load(path, allow_pickle=False), {**timing, "cached": True}
        t = time.perf_counter()
        K = compute()
        timing = {"secs": time.perf_counter() - t, "load": load()}
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part.npy")
        np.save(tmp, K, allow_pickle=False)
        os.replace(tmp, path)
        srsly.write_json(side, timing)
        return K, {**timing, "cached": False}


def kernel_system(name, kernel, K, rows, items, train_docs, test_docs, timings, n_threads, c_grid,
                  time_prediction=False):
    """Per granularity: the classifier trained from the Gram ``K`` (C on
    dev), test decisions from ``rows`` (test × all training items, columns
    picked at the support), the real support-only prediction timed once."""
    out = {}
    for gran in GRANULARITIES:
        gold = labelled(train_docs, gran)
        clf = KernelClassifier(kernel, c_grid, 10, n_threads).fit_gram(K, items, gold, sorted(set(gold)),
                                                                        progress=False)
        margins = clf.model.decision(rows[:, clf.model.support])
        if time_prediction and gran == "coarse":
            t = time.perf_counter()
            real = clf.decision(test_docs)
            secs = time.perf_counter() - t
            assert np.allclose(real, margins, atol=1e-9), "support-only rows disagree with the full rows"
            timings.append(f"{name}: predicting the {len(test_docs)} test questions (coarse, kernel rows against "
                           f"{len(clf.support_items)} support vectors): {secs:.1f} s")
        pred = [clf.labels[i] for i in np.argmax(margins, axis=1)]
        out[gran] = {"pred": pred, "C": clf.C, "dev": max(clf.dev_scores.values()), "n_support": len(clf.support_items)}
        msg.text(f"{name} [{gran}]: C = {clf.C} (dev {clf.dev_scores}), {len(clf.support_items)} support vectors")
    return out


def dev_sum(result):
    """A system's dev accuracy, coarse plus fine: what the settings are chosen by."""
    return result["coarse"]["dev"] + result["fine"]["dev"]


def bow_svm(train_docs, test_docs, c_grid):
    """LinearSVC on L2-normalised word uni+bigram counts, C on dev, refit on all."""
    from sklearn.preprocessing import normalize
    from sklearn.svm import LinearSVC

    vocab = {}
    X = normalize(count_vectors(ngram_features([[t.text for t in d] for d in train_docs]), vocab))
    n_feats = len(vocab)
    X_test = count_vectors(ngram_features([[t.text for t in d] for d in test_docs]), dict(vocab))
    X_test = normalize(X_test[:, :n_feats])
    held = dev_mask(len(train_docs), 10)
    out = {}
    for gran in GRANULARITIES:
        y = np.array(labelled(train_docs, gran))
        dev = {C: float(np.mean(LinearSVC(C=C).fit(X[~held], y[~held]).predict(X[held]) == y[held]))
               for C in c_grid}
        C = min(dev, key=lambda c: (-dev[c], c))
        pred = LinearSVC(C=C).fit(X, y).predict(X_test).tolist()
        out[gran] = {"pred": pred, "C": C, "dev": dev[C]}
        msg.text(f"BOW linear SVM [{gran}]: C = {C} (dev {dev})")
    return out


SPACY_MODELS = {
    "bow": {"@architectures": "spacy.TextCatBOW.v3", "exclusive_classes": True, "ngram_size": 2,
            "no_output_layer": False, "length": 262144},
    "ensemble": {"@architectures": "spacy.TextCatEnsemble.v2",
                 "tok2vec": {"@architectures": "spacy.Tok2Vec.v2",
                             "embed": {"@architectures": "spacy.MultiHashEmbed.v2", "width": 64,
                                       "rows": [2000, 2000, 500, 1000, 500],
                                       "attrs": ["NORM", "LOWER", "PREFIX", "SUFFIX", "SHAPE"],
                                       "include_static_vectors": False},
                             "encode": {"@architectures": "spacy.MaxoutWindowEncoder.v2", "width": 64,
                                        "window_size": 1, "maxout_pieces": 3, "depth": 2}},
                 "linear_model": {"@architectures": "spacy.TextCatBOW.v3", "exclusive_classes": True,
                                  "ngram_size": 2, "no_output_layer": False, "length": 262144}},
}


def spacy_textcat(arch, train_docs, test_docs, max_epochs, patience, seed=0):
    """spaCy's ``textcat`` (exclusive classes): trained on the others until
    dev accuracy (the every-10th split) has not risen for ``patience`` epochs
    (or ``max_epochs``), then retrained from scratch on all training questions
    for the best dev epoch's count."""
    import random

    import spacy
    from spacy.tokens import Doc
    from spacy.training import Example
    from spacy.util import fix_random_seed, minibatch

    from spacy_structpref.models.optimizers import FusedAdam

    def fresh(doc, cats=None):
        new = Doc(nlp_vocab, words=[t.text for t in doc])
        if cats is not None:
            new.cats = cats
        return new

    def run(train, evaluate, epochs, labels):
        fix_random_seed(seed)
        nlp = spacy.blank("en")
        tc = nlp.add_pipe("textcat", config={"model": SPACY_MODELS[arch]})
        for label in labels:
            tc.add_label(label)
        examples = [Example(fresh(d), fresh(d, cats)) for d, cats in train]
        # spaCy's default optimizer (the blank pipeline's [training.optimizer]) in
        # the fused implementation: the same weights bit for bit, faster
        settings = {k: v for k, v in nlp.config["training"]["optimizer"].items() if k != "@optimizers"}
        optimizer = nlp.initialize(lambda: examples, sgd=FusedAdam(**settings))
        rng = random.Random(seed)
        history = []
        for epoch in range(epochs):
            rng.shuffle(examples)
            for batch in minibatch(examples, 32):
                nlp.update(batch, sgd=optimizer, drop=0.2)
            if evaluate is not None:
                history.append(evaluate(nlp))
                if epoch - int(np.argmax(history)) >= patience:
                    break
        return nlp, history

    nlp_vocab = spacy.blank("en").vocab
    out = {}
    held = dev_mask(len(train_docs), 10)
    for gran in GRANULARITIES:
        gold = labelled(train_docs, gran)
        labels = sorted(set(gold))
        data = [(d, {label: float(label == g) for label in labels}) for d, g in zip(train_docs, gold)]
        dev_docs = [d for d, h in zip(train_docs, held) if h]
        dev_gold = [g for g, h in zip(gold, held) if h]

        def dev_accuracy(nlp):
            pred = [max(doc.cats, key=doc.cats.get) for doc in nlp.pipe(fresh(d) for d in dev_docs)]
            return float(np.mean([p == g for p, g in zip(pred, dev_gold)]))

        t = time.perf_counter()
        _, history = run([x for x, h in zip(data, held) if not h], dev_accuracy, max_epochs, labels)
        epochs = int(np.argmax(history)) + 1
        nlp, _ = run(data, None, epochs, labels)
        pred = [max(doc.cats, key=doc.cats.get) for doc in nlp.pipe(fresh(d) for d in test_docs)]
        out[gran] = {"pred": pred, "epochs": epochs, "dev": history[epochs - 1]}
        msg.text(f"spaCy textcat {arch} [{gran}]: {epochs} epoch(s) (dev {[round(h, 4) for h in history]}), "
                 f"{time.perf_counter() - t:.0f} s")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parser", type=Path, default=Path("training/forest_parser/model-best"))
    ap.add_argument("--cache", type=Path, default=Path("training/qc_parses"))
    ap.add_argument("--grams", type=Path, default=Path("training/qc_grams"), help="Gram matrices cached here")
    ap.add_argument("--n-process", type=int, default=1, help="parser processes for --parse-only")
    ap.add_argument("--n-threads", type=int, default=2, help="threads for the forest Gram and the SVMs")
    ap.add_argument("--lam", type=float, default=DEFAULT_LAM, help="the tree and forest kernels' decay λ")
    ap.add_argument("--c-grid", default=",".join(map(str, DEFAULT_C_GRID)), help="the SVMs' C values (dev chooses)")
    ap.add_argument("--train-size", type=int, default=0, help="> 0: the first N training questions only")
    ap.add_argument("--alpha-size", type=int, default=1500, help="training questions the α dev choice uses")
    ap.add_argument("--spacy-epochs", type=int, default=30, help="most epochs of spaCy's bow textcat (dev chooses)")
    ap.add_argument("--ensemble-epochs", type=int, default=15, help="most epochs of spaCy's ensemble textcat")
    ap.add_argument("--patience", type=int, default=3,
                    help="spaCy's textcat stops after this many epochs without a better dev accuracy")
    ap.add_argument("--vectors", type=Path, default=Path("corpus/vectors"),
                    help="the pipeline whose static vectors the word clusters come from")
    ap.add_argument("--cluster-grid", default="100,200,500", help="numbers of word clusters (dev chooses)")
    ap.add_argument("--skip", default="",
                    help="comma-separated systems to leave out: spacy,tempered,composite,clusters")
    ap.add_argument("--max-steps", type=int, default=0, help="> 0: a smoke run on N questions per split")
    ap.add_argument("--parse-only", action="store_true", help="build the parse cache and stop")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args()
    if not 0 < args.lam <= 1:
        ap.error(f"--lam is the subset-tree decay, in (0, 1], got {args.lam}")
    if args.parse_only or not all((args.cache / f"{s}.spacy").exists() for s in ("train+dev", "test")):
        msg.info(f"parsed: {parse_questions(args.parser, args.cache, args.n_process, args.max_steps or None)}")
    if args.parse_only:
        return
    c_grid = tuple(float(c) for c in args.c_grid.split(","))
    limit = args.max_steps or args.train_size or None
    skip = set(filter(None, args.skip.split(",")))
    # the questions in the vocab of the static vectors, which the word clusters are learnt from
    vocab = None if "clusters" in skip else spacy.load(args.vectors).vocab
    train_docs = load_parsed(args.cache / "train+dev.spacy", "fine", vocab)[:limit]
    test_docs = load_parsed(args.cache / "test.spacy", "fine", vocab)[:args.max_steps or None]
    if args.max_steps:
        args.spacy_epochs = args.ensemble_epochs = 1
        args.alpha_size = min(args.alpha_size, args.max_steps)
    msg.info(f"load {load()}; {len(train_docs)} training questions (dev: every 10th), {len(test_docs)} test")
    grams = Grams(args.grams, f"{args.cache.resolve()}:{len(train_docs)}")
    timings, systems, extra = [], {}, {}

    systems["BOW linear SVM"] = bow_svm(train_docs, test_docs, c_grid)

    def structure(name, kernel):
        kernel.fit(train_docs)
        items = kernel.items(train_docs)
        prepared = kernel.prepare(items)
        settings = kernel.settings()
        if settings.get("word_clusters"):  # the clusters depend on the vectors
            settings["vectors"] = vectors_digest(vocab.vectors)
        K, timing = grams.get(name, settings, lambda: kernel.gram(prepared, None, True))
        if timing["secs"] is not None:
            when = " (an earlier run, cached since)" if timing["cached"] else ""
            timings.append(f"{name}: Gram matrix {len(items)} x {len(items)} ({len(items) * (len(items) + 1) // 2:,} "
                           f"pairs), {args.n_threads} threads: {timing['secs']:.1f} s (load {timing['load']}){when}")
        test_prepared = kernel.prepare(kernel.items(test_docs))
        rows, _ = grams.get(name + "-test", settings, lambda: kernel.gram(test_prepared, prepared, True))
        return K, rows, items

    bow = BowDocKernel()
    K_bow, rows_bow, items_bow = structure("bow", bow)
    tree = TreeDocKernel(args.lam)
    K_tree, rows_tree, items_tree = structure("tree kernel", tree)
    systems["tree kernel"] = kernel_system("tree kernel", tree, K_tree, rows_tree, items_tree, train_docs,
                                           test_docs, timings, args.n_threads, c_grid, True)
    forest = ForestDocKernel(args.lam, 1.0, None, args.n_threads)
    K_forest, rows_forest, items_forest = structure("forest kernel", forest)
    systems["forest kernel"] = kernel_system("forest kernel", forest, K_forest, rows_forest, items_forest,
                                             train_docs, test_docs, timings, args.n_threads, c_grid, True)
    def with_bow(sname, kern, K_s, rows_s, items_s):
        """The composite of a structure kernel and the BOW kernel, its weight on dev."""
        best = None
        for w in BOW_WEIGHTS:
            comp = SumDocKernel([kern, bow], [1 - w, w])
            res = kernel_system(f"{sname} + BOW (w={w})", comp, comp.combine([K_s, K_bow]),
                                comp.combine([rows_s, rows_bow]), list(zip(items_s, items_bow)), train_docs,
                                test_docs, [], args.n_threads, c_grid)
            if best is None or dev_sum(res) > dev_sum(best[1]):
                best = (w, res)
        systems[f"{sname} + BOW"] = best[1]
        extra[f"{sname} + BOW weight (dev)"] = best[0]

    if "composite" not in skip:
        with_bow("tree kernel", tree, K_tree, rows_tree, items_tree)
        with_bow("forest kernel", forest, K_forest, rows_forest, items_forest)
    if "clusters" not in skip:
        by_k = {}
        for k in (int(x) for x in args.cluster_grid.split(",")):
            kern = TreeDocKernel(args.lam, word_clusters=k)
            K_k, rows_k, items_k = structure(f"tree kernel, {k} word clusters", kern)
            by_k[k] = (kern, K_k, rows_k, items_k, kernel_system(f"tree kernel, {k} word clusters", kern, K_k,
                                                                 rows_k, items_k, train_docs, test_docs, timings,
                                                                 args.n_threads, c_grid))
        extra["word clusters dev accuracy (coarse + fine)"] = {k: dev_sum(v[-1]) for k, v in by_k.items()}
        k = max(by_k, key=lambda x: (dev_sum(by_k[x][-1]), -x))
        extra["word clusters (dev)"] = k
        kern, K_k, rows_k, items_k, systems["tree kernel, clusters"] = by_k[k]
        with_bow("tree kernel, clusters", kern, K_k, rows_k, items_k)
        del by_k
        kern = ForestDocKernel(args.lam, 1.0, None, args.n_threads, word_clusters=k)
        K_k, rows_k, items_k = structure(f"forest kernel, {k} word clusters", kern)
        systems["forest kernel, clusters"] = kernel_system(f"forest kernel, {k} word clusters", kern, K_k,
                                                                rows_k, items_k, train_docs, test_docs, timings,
                                                                args.n_threads, c_grid)
        with_bow("forest kernel, clusters", kern, K_k, rows_k, items_k)
    del K_bow, rows_bow
    if "spacy" not in skip:
        for arch, epochs in (("bow", args.spacy_epochs), ("ensemble", args.ensemble_epochs)):
            systems[f"spaCy textcat ({arch})"] = spacy_textcat(arch, train_docs, test_docs, epochs, args.patience)
    if "tempered" not in skip:
        n = min(args.alpha_size, len(train_docs))
        sub = train_docs[:n]
        gold = labelled(sub, "coarse")
        dev_by_alpha = {}
        for alpha in ALPHAS:
            kern = ForestDocKernel(args.lam, alpha, None, args.n_threads)
            items = kern.items(sub)
            Ka, _ = grams.get(f"alpha-{n}", kern.settings(), lambda: kern.gram(kern.prepare(items), None, True))
            clf = KernelClassifier(kern, c_grid, 10, args.n_threads).fit_gram(Ka, items, gold, sorted(set(gold)),
                                                                              progress=False)
            dev_by_alpha[alpha] = max(clf.dev_scores.values())
        alpha = max(ALPHAS, key=lambda a: (dev_by_alpha[a], -abs(np.log(a))))
        msg.text(f"tempered forest kernel: coarse dev accuracy by α on the first {n} questions {dev_by_alpha}: "
                 f"α = {alpha}")
        extra["alpha (dev)"], extra["alpha dev accuracy"] = alpha, dev_by_alpha
        tempered = ForestDocKernel(args.lam, alpha, None, args.n_threads)
        K_t, rows_t, items_t = structure(f"tempered forest kernel (α={alpha})", tempered)
        systems[f"tempered forest kernel (α={alpha})"] = kernel_system(
            f"tempered forest kernel (α={alpha})", tempered, K_t, rows_t, items_t, train_docs, test_docs, timings,
            args.n_threads, c_grid)

    extra["training questions"], extra["lambda"] = len(train_docs), args.lam
    report(systems, test_docs, timings, extra, args)


def report(systems, test_docs, timings, extra, args):
    results = {}
    for name, by_gran in systems.items():
        results[name] = {}
        for gran, res in by_gran.items():
            gold = labelled(test_docs, gran)
            labels = sorted(set(gold) | set(res["pred"]))
            results[name][gran] = {**scores(gold, res["pred"], labels),
                                   **{k: v for k, v in res.items() if k != "pred"}}
    coarse_labels = sorted(set(labelled(test_docs, "coarse")))
    print(f"\nload {load()}")
    for line in timings:
        print(line)
    print(f"\nTREC question classification, {len(test_docs)} test questions; settings (those marked (dev) chosen on dev): {extra}")
    header = ["system", "coarse acc", "coarse macro F", "fine acc", "fine macro F"]
    rows = [[name, *(f"{r[g][m]:.2f}" for g in GRANULARITIES for m in ("accuracy", "macro_f"))]
            for name, r in results.items()]
    msg.table(rows, header=header, divider=True, aligns=("l", "r", "r", "r", "r"))
    print("Coarse classes, P / R / F (%):")
    rows = [[name, *(("{p:.1f} / {r:.1f} / {f:.1f}".format(**r["coarse"]["per_class"][c])
                      if c in r["coarse"]["per_class"] else "-") for c in coarse_labels)]
            for name, r in results.items()]
    msg.table(rows, header=["system", *coarse_labels], divider=True)
    if args.json is not None:
        srsly.write_json(args.json, {"results": results, "timings": timings, "settings": extra})
    coarse = {name: r["coarse"]["accuracy"] for name, r in results.items()}
    kernel_systems = [name for name in coarse if "kernel" in name]
    best = max(kernel_systems, key=coarse.get)
    print(f"best kernel system, coarse: {best} {coarse[best]:.2f}, BOW linear SVM {coarse['BOW linear SVM']:.2f}: "
          f"{coarse[best] - coarse['BOW linear SVM']:+.2f}")
    for suffix in ("", ", clusters"):
        if "forest kernel" + suffix in coarse:
            print(f"forest - tree{suffix}, coarse accuracy: "
                  f"{coarse['forest kernel' + suffix] - coarse['tree kernel' + suffix]:+.2f}")


if __name__ == "__main__":
    main()
