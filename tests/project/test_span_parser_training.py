"""``spacy train configs/span_parser.cfg`` trains the span-CRF forest_parser
through spaCy's loop: on a tiny slice and a small network, with static
vectors that ``train-vectors`` trained on the slice, a few steps write a
model-best (evaluated after step 0) that loads and parses."""
import spacy
from spacy.cli.train import train
from spacy.tokens import Doc, DocBin

from spacy_structpref.cli.vectors import train_vectors
from spacy_structpref.corpora import corpus_docs

from tests.helpers.paths import CONFIGS


def test_spacy_train_writes_a_model_best_after_step_0(tmp_path):
    nlp = spacy.blank("en")
    for split, n in (("train", 24), ("dev", 4)):
        docs = [d for d in corpus_docs("ptb", split, nlp.vocab, limit=100) if len(d) <= 12][:n]
        DocBin(docs=docs, store_user_data=True).to_disk(tmp_path / f"{split}.spacy")
    train_vectors(tmp_path / "vectors", [tmp_path / "train.spacy"], dim=8, min_count=1)
    small = {"embed_width": 16, "embed_rows": 500, "char_width": 16, "char_dim": 8, "lstm_width": 32,
             "lstm_depth": 1, "hidden_width": 32}
    overrides = {"paths.train": str(tmp_path / "train.spacy"), "paths.dev": str(tmp_path / "dev.spacy"),
                 "paths.vectors": str(tmp_path / "vectors"),
                 "training.max_steps": 4, "training.eval_frequency": 100, "training.batcher.size": 8,
                 "training.logger.progress_bar": False, "components.forest_parser.k": 3,
                 **{f"components.forest_parser.model.{key}": value for key, value in small.items()}}
    train(CONFIGS / "span_parser.cfg", tmp_path / "out", overrides=overrides)
    best = spacy.load(tmp_path / "out" / "model-best")
    assert best.get_pipe("forest_parser").cfg["model"] == "spacy_structpref.SpanCRF.v1"
    assert best.vocab.vectors.shape == spacy.load(tmp_path / "vectors").vocab.vectors.shape
    doc = best(Doc(best.vocab, words="The company said its profit rose .".split()))
    assert doc._.parse.leaves() == [t.text for t in doc] and 1 <= len(doc._.nbest) <= 3
    assert (tmp_path / "out" / "model-last").is_dir()
