"""Tag accuracy of the forest_parser's flat fallback on Docs longer than its
``max_length``: the PTB-sample dev split (wsj_0140–0169) cut into Docs of
``--doc-length`` tokens (120 against the default bound of 100, so that every
Doc falls back), parsed by a PCFG ``forest_parser`` whose grammar is read off
the first ``--n-train`` train trees (0: all). Each fallback tag is a word's
most probable tag taken alone, ``argmax_T P(T | w)``; the line below it is the
argmax of ``P(w | T)``, the chart's lexical score, over the same grammar.

    NLTK_DATA=../shared/nltk_data python bench/fallback_tags.py [--n-train 0] [--doc-length 120]

The last line reads ``fallback tag accuracy X.XXX on N tokens in D Docs (all
fell back: F)``.
"""
import argparse
import time

import numpy as np
import spacy
from spacy.tokens import Doc
from spacy.training import Example

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.components.forest_parser import FALLBACK_KEY
from spacy_structpref.corpora import ptb_trees
from spacy_structpref.trees.doc import tree_to_doc


def tagged_chunks(trees, length):
    """(words, gold tags) of the trees' tokens in order, cut into chunks of ``length``."""
    pairs = [pair for tree in trees for pair in tree.pos()]
    return [pairs[s:s + length] for s in range(0, len(pairs) - length + 1, length)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-train", type=int, default=0, help="train trees for the grammar (0: all)")
    ap.add_argument("--doc-length", type=int, default=120)
    args = ap.parse_args()

    nlp = spacy.blank("en")
    parser = nlp.add_pipe("forest_parser", config={"store_forest": False, "k": 1})
    train = list(ptb_trees("train"))[:args.n_train or None]
    start = time.process_time()
    nlp.initialize(lambda: [Example(Doc(nlp.vocab, words=[t.text for t in d]), d)
                            for d in (tree_to_doc(nlp.vocab, t) for t in train)])
    print(f"grammar of {len(train)} trees in {time.process_time() - start:.1f} CPU-s")
    chunks = tagged_chunks(ptb_trees("dev"), args.doc_length)
    docs = list(nlp.pipe(Doc(nlp.vocab, words=[w for w, _ in chunk]) for chunk in chunks))
    gold = np.array([tag for chunk in chunks for _, tag in chunk])
    predicted = np.array([t.tag_ for doc in docs for t in doc])
    grammar, labels = parser.grammar, parser.parser.labels
    lexical = np.array([labels[ids[np.argmax(scores)]] for chunk in chunks
                        for ids, scores in (grammar.tag_scores(w, i) for i, (w, _) in enumerate(chunk))])
    all_fell_back = all(doc.user_data.get(FALLBACK_KEY) for doc in docs)
    print(f"argmax P(w | T) tag accuracy {np.mean(lexical == gold):.3f}")
    print(f"fallback tag accuracy {np.mean(predicted == gold):.3f} on {len(gold)} tokens in {len(docs)} Docs "
          f"(all fell back: {all_fell_back})")


if __name__ == "__main__":
    main()
