"""The package's spaCy factories, registered in one place (as spaCy 3.8
registers its own in ``spacy.pipeline.factories``), with their default
settings.

spaCy imports every plugin's factories whenever a pipeline is created, so
this module stays cheap: each factory imports its component when it builds
one. Each also guards the pipeline it builds for (:func:`.pipeline.guard_pipeline`):
``nlp.to_disk`` and ``spacy.load`` then save and load it as a whole.
"""
from typing import Callable, List, Optional

from spacy.language import Language
from thinc.api import Model

from ..learners.registrations import perceptron_config
from ..models import span_crf  # noqa: F401  (registers spacy_structpref.SpanCRF.v1)
from ..models import span_ensemble  # noqa: F401  (registers spacy_structpref.SpanCRFEnsemble.v1)
from ..models import tensor_features  # noqa: F401  (registers spacy_structpref.TensorFeatures.v1)
from .forest_parser import DEFAULT_CONFIG as FOREST_PARSER_CONFIG
from .pipeline import guard_pipeline


def distro_model(features: str) -> dict:
    """The DISTRO model block over the feature layer ``features`` (an
    architecture name): label vectors of the learned rank (``rank = null``:
    as many dimensions as labels), ``onehot = false`` (true: the SVM baseline)."""
    return {"@architectures": "spacy_structpref.DistroTagger.v1", "rank": None, "onehot": False,
            "tok2vec": {"@architectures": features, "width": None}}


# the learning settings of the DISTRO components
DISTRO_SCHEDULE = {"w_steps": 100, "a_steps": 20, "w_epochs": None, "a_epochs": None, "a_rounds": None,
                   "restarts": 1, "nuclear_lambda": 1.0, "a_learn_rate_scale": 1.0, "average_A": True, "cost": 1.0}
# the effective rank of A in the scores; its share of the labels a column of spacy train's table
DISTRO_RANK_WEIGHTS = {"effective_rank": None, "rank_share": 0.0}

PARSEVAL_WEIGHTS = {"parseval_f": 1.0, "parseval_p": 0.0, "parseval_r": 0.0, "parseval_f_40": 0.0}


@Language.factory(
    "distro_tagger",
    assigns=["token.tag"],
    default_config={"model": distro_model("spacy_structpref.SparseFeatures.v1"), "overwrite": False,
                    **DISTRO_SCHEDULE, "tag_dict_min_count": None,
                    "variant_start": None, "scorer": {"@scorers": "spacy.tagger_scorer.v1"}},
    default_score_weights={"tag_acc": 1.0, **DISTRO_RANK_WEIGHTS},
)
def make_distro_tagger(nlp: Language, name: str, model: Model, overwrite: bool, w_steps: int,
                       a_steps: int, w_epochs: Optional[int], a_epochs: Optional[int], a_rounds: Optional[int],
                       restarts: int, nuclear_lambda: float, a_learn_rate_scale: float, average_A: bool,
                       cost: float, tag_dict_min_count: Optional[int], variant_start: Optional[float],
                       scorer: Optional[Callable]):
    guard_pipeline(nlp)
    from .distro_tagger import DistroTaggerComponent

    return DistroTaggerComponent(nlp.vocab, model, name, overwrite=overwrite, w_steps=w_steps,
                                 a_steps=a_steps, w_epochs=w_epochs, a_epochs=a_epochs, a_rounds=a_rounds,
                                 restarts=restarts, nuclear_lambda=nuclear_lambda,
                                 a_learn_rate_scale=a_learn_rate_scale, average_A=average_A, cost=cost,
                                 tag_dict_min_count=tag_dict_min_count, variant_start=variant_start,
                                 scorer=scorer)


@Language.factory(
    "distro_textcat",
    assigns=["doc.cats"],
    default_config={"model": distro_model("spacy_structpref.SparseBagFeatures.v1"), **DISTRO_SCHEDULE,
                    "scorer": {"@scorers": "spacy_structpref.distro_textcat_scorer.v1"}},
    default_score_weights={"cats_acc": 1.0, **DISTRO_RANK_WEIGHTS},
)
def make_distro_textcat(nlp: Language, name: str, model: Model, w_steps: int, a_steps: int,
                        w_epochs: Optional[int], a_epochs: Optional[int], a_rounds: Optional[int], restarts: int,
                        nuclear_lambda: float, a_learn_rate_scale: float, average_A: bool, cost: float,
                        scorer: Optional[Callable]):
    guard_pipeline(nlp)
    from .distro_textcat import DistroTextcat

    return DistroTextcat(nlp.vocab, model, name, w_steps=w_steps, a_steps=a_steps, w_epochs=w_epochs,
                         a_epochs=a_epochs, a_rounds=a_rounds, restarts=restarts, nuclear_lambda=nuclear_lambda,
                         a_learn_rate_scale=a_learn_rate_scale, average_A=average_A, cost=cost, scorer=scorer)


@Language.factory(
    "forest_parser",
    assigns=["doc.spans", "token.tag", "doc._.nbest", "doc._.forest"],
    default_config=FOREST_PARSER_CONFIG,
    default_score_weights={**PARSEVAL_WEIGHTS, "parse_fallbacks": None, "parse_too_long": None},
)
def make_forest_parser(nlp: Language, name: str, model: Model, threshold: float, max_length: Optional[int],
                       k: int, samples: int, set_tags: bool, store_forest: bool, spans_key: str,
                       scorer: Optional[Callable]):
    guard_pipeline(nlp)
    from .forest_parser import ForestParser

    return ForestParser(nlp.vocab, model, name, scorer=scorer, threshold=threshold, max_length=max_length, k=k,
                        samples=samples, set_tags=set_tags, store_forest=store_forest, spans_key=spans_key)


@Language.factory(
    "parse_reranker",
    assigns=["doc.spans", "token.tag", "doc._.rerank"],
    requires=["doc._.nbest"],
    # the kernel voted perceptron with the composite kernel K_λ + b·log p·log p'
    default_config={"learner": perceptron_config(
                        {"@misc": "spacy_structpref.CompositeKernel.v1", "b": 0.2,
                         "tree_kernel": {"@misc": "spacy_structpref.TreeKernel.v1", "lam": 0.3, "sigma": 1,
                                         "normalize": True}}),
                    "k": 50, "n_folds": 10, "n_jobs": None, "min_gap": 0.05, "set_tags": True,
                    "spans_key": "constituents", "scorer": {"@scorers": "spacy_structpref.parseval_scorer.v1"}},
    default_score_weights=PARSEVAL_WEIGHTS,
)
def make_parse_reranker(nlp: Language, name: str, learner, k: int, n_folds: int, n_jobs: Optional[int],
                        min_gap: float, set_tags: bool, spans_key: str, scorer: Optional[Callable]):
    guard_pipeline(nlp)
    from .parse_reranker import ParseReranker

    return ParseReranker(nlp.vocab, learner, name, k=k, n_folds=n_folds, n_jobs=n_jobs, min_gap=min_gap,
                         set_tags=set_tags, spans_key=spans_key, scorer=scorer)


@Language.factory(
    "attachment_predictor",
    requires=["token.tag"],
    assigns=["doc.spans", "token._.attachment", "doc._.attach_fallbacks"],
    # the kernel voted perceptron with the subset-tree kernel (configs/learners/vp.cfg)
    default_config={"learner": perceptron_config(
                        {"@misc": "spacy_structpref.TreeKernel.v1", "lam": 0.4, "sigma": 1, "normalize": True}),
                    "reduced": True, "specialise": True, "beam_width": 1, "softmax_scale": 1.0,
                    "foot_classes": {"@misc": "spacy_structpref.FootClasses.v1", "tagset": "ptb"},
                    "spans_key": "constituents", "max_length": 300,
                    "scorer": {"@scorers": "spacy_structpref.parseval_scorer.v1"}},
    default_score_weights={"parseval_f": 0.5, "parseval_f_40": 0.0, "attach_acc": 0.5,
                           "attach_fallbacks": None, "attach_too_long": None},
)
def make_attachment_predictor(nlp: Language, name: str, learner, reduced: bool, specialise: bool,
                              beam_width: int, softmax_scale: float, foot_classes, spans_key: str,
                              max_length: Optional[int], scorer: Optional[Callable]):
    guard_pipeline(nlp)
    from .attachment_predictor import AttachmentPredictor

    return AttachmentPredictor(nlp.vocab, learner, name, reduced=reduced, specialise=specialise,
                               beam_width=beam_width, softmax_scale=softmax_scale, foot_classes=foot_classes,
                               spans_key=spans_key, max_length=max_length, scorer=scorer)


@Language.factory(
    "kernel_textcat",
    assigns=["doc.cats"],
    requires=["doc.spans"],
    default_config={"kernel": {"@misc": "spacy_structpref.NamedDocKernel.v1", "name": "tree", "lam": 0.4,
                               "alpha": 1.0, "bow_weight": 0.5, "merit_ratio": None, "n_threads": 2},
                    "C_grid": [0.3, 1.0, 3.0, 10.0, 30.0, 100.0], "dev_every": 10, "n_threads": 2,
                    "scorer": {"@scorers": "spacy_structpref.textcat_scorer.v1"}},
    # cats_held_out_acc at weight 0: recorded in meta.json's performance, chosen by nothing
    default_score_weights={"cats_score": 1.0, "cats_accuracy": 0.0, "cats_held_out_acc": 0.0, "cats_micro_p": None,
                           "cats_micro_r": None, "cats_micro_f": None, "cats_macro_p": None, "cats_macro_r": None,
                           "cats_macro_f": None, "cats_macro_auc": None, "cats_f_per_type": None},
)
def make_kernel_textcat(nlp: Language, name: str, kernel, C_grid: List[float], dev_every: int, n_threads: int,
                        scorer: Optional[Callable]):
    guard_pipeline(nlp)
    from .kernel_textcat import KernelTextCategorizer

    return KernelTextCategorizer(nlp.vocab, kernel, name, C_grid=C_grid, dev_every=dev_every,
                                 n_threads=n_threads, scorer=scorer)
