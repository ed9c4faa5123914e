"""spaCy component ``attachment_predictor``: a strongly incremental parser
made of first-pass attachment decisions (Menchetti et al. 2005, §6.1; Sturt
et al. 2003; Lombardo & Sturt's dynamic grammar).

The words are read left to right keeping one connected tree. At each word
the connection paths (CPs) of the inventory that fit are the candidates;
the trained preference learner (the kernel voted perceptron with the
subset-tree kernel, or the recursive neural network; one per foot class
when ``specialise``; on reduced trees when ``reduced``) scores them, and
:class:`~spacy_structpref.incremental.IncrementalParser` keeps the best
(``beam_width = 1``: greedy) or the ``beam_width`` best partial trees. The
final tree goes to ``doc.spans[spans_key]`` (``doc._.parse``, under ``TOP``),
each word's decision to ``token._.attachment`` (``Step.to_dict()``: kind,
anchor label and depth, CP type, utility, log-probability, number of
alternatives, fallback) and the number of fallback words to
``doc._.attach_fallbacks``.

A Doc of more than ``max_length`` tokens is not parsed: the search's time
grows about as n^2.5 (the right frontier and the candidate sets grow with
the prefix), so it gets at once the flat tree ``(TOP (S (tag word) ...))`` of
its tags, every word a fallback step, ``doc.user_data[FALLBACK_KEY]`` set to
"too long", and is counted in the ``attach_too_long`` score.

Tags are read from ``token.tag_``: put a tagger (``distro_tagger``) before
this component, or give it Docs that carry tags. spaCy's corpus reader puts
no reference annotation on the predicted Docs (``gold_preproc`` only fixes
the tokenisation), so evaluating with gold tags needs them copied there: the
augmenter ``spacy_structpref.gold_tags.v1`` does it for a corpus in a
training config, ``bench/incremental_parser.py`` for the test split.

Training reads only the reference Docs: ``initialize`` builds the CP
inventory from their gold trees and initializes the learner on the
preference sets of a sample of them, ``update`` takes one learner update
on the preference sets of a batch (the perceptron: one pass over them,
mistakes as the loss; the recursive net: one gradient step with spaCy's
optimizer).

Modules with compiled code (the kernels) and nltk load on first use, so that
importing this factory stays cheap.
"""
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from spacy import util
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples

from ..errors import StructPrefError, check_count
from ..saving import Part
from .base import LearnerPipe, check_spans_key, find_pipe, preceding_pipes

FACTORY = "attachment_predictor"
TAGGERS = ("distro_tagger", "tagger")  # the factories of the taggers whose tags it reads
# doc.user_data flag of a Doc that got the flat tree for being longer than max_length
FALLBACK_KEY = "attachment_predictor_fallback"
CACHE_MB = 1024  # the preference sets' cache, unless initialize says otherwise


def find_attachment_predictor(nlp: Language) -> "AttachmentPredictor":
    """The pipeline's first ``attachment_predictor`` (a clear error if it has none)."""
    return find_pipe(nlp, FACTORY)


@util.registry.augmenters("spacy_structpref.gold_tags.v1")
def make_gold_tags_augmenter() -> Callable[[Language, Example], Iterator[Example]]:
    """An augmenter that copies the reference tags onto each example's
    predicted Doc (``[corpora.dev.augmenter]``), so that a pipeline without a
    tagger is evaluated with gold tags."""
    return gold_tags


def gold_tags(nlp: Language, example: Example) -> Iterator[Example]:
    doc = example.predicted.copy()
    for token, tag in zip(doc, example.get_aligned("TAG", as_string=True)):
        if tag:  # a token without an aligned reference token keeps its own
            token.tag_ = tag
    yield Example(doc, example.reference)


class AttachmentPredictor(LearnerPipe):
    """Settings (defaults in :mod:`.factories`; see the module docstring):
    ``learner`` (a preference learner from a ``registry.misc`` block:
    ``spacy_structpref.KernelPerceptron.v1`` with a tree kernel, or
    ``spacy_structpref.RecursiveNetLearner.v1``), ``reduced`` (tree
    reduction of the candidates), ``specialise`` (one clone of the learner
    per foot class), ``beam_width``, ``softmax_scale``, ``foot_classes``
    (the classes of the next word's tag that ``specialise`` splits by: a
    ``spacy_structpref.FootClasses.v1`` block, ``tagset = "ptb"`` or
    ``"universal"`` or a JSON ``path`` or a ``classes`` mapping; saved with
    the component), ``spans_key`` (the span group of the gold trees and
    of the predicted tree) and ``max_length`` (longer Docs get the flat
    fallback tree at once; null: no bound).

    The search scores a word's candidates with ``a·U`` (``a`` =
    ``softmax_scale``), so a partial tree's score is the sum of
    ``log p(T_{i+1} | T_i)`` with ``p ∝ exp(a·U)``, the softmax preference
    model (Menchetti et al. 2005, eq. 9) at temperature ``1/a``. Greedy
    parsing does not depend on ``a``; a beam does: the perceptron's raw
    utilities span a fraction of a unit, and at ``a = 1`` every choice
    looks almost uniform, so the score rewards prefixes with few
    alternatives rather than good ones. :meth:`fit_softmax_scale` sets
    ``a`` by maximum likelihood on held-out Docs.

    ``set_cache`` is the :class:`~spacy_structpref.incremental.SetCache` of
    the preference sets that training and scoring have read (None before
    any; its size is ``initialize``'s ``cache_mb``)."""

    factory = FACTORY
    token_extensions = ("attachment",)  # a Step.to_dict()
    doc_extensions = ("attach_fallbacks",)
    runtime_settings = ("beam_width", "softmax_scale", "spans_key")

    def __init__(self, vocab, learner, name: str = FACTORY, *, reduced: bool = True,
                 specialise: bool = True, beam_width: int = 1, softmax_scale: float = 1.0,
                 foot_classes="ptb", spans_key: str = "constituents", max_length: Optional[int] = 300,
                 scorer: Optional[Callable] = None):
        from ..incremental.classes import foot_classes as make_foot_classes
        from ..learners.base import PreferenceLearner

        if not isinstance(learner, PreferenceLearner):
            raise StructPrefError(
                f"{name}: the learner must be a preference learner (spacy_structpref.KernelPerceptron.v1 "
                f"or spacy_structpref.RecursiveNetLearner.v1), got a {type(learner).__name__}"
                + ("; give its prototype and set specialise = true" if hasattr(learner, "prototype")
                   else ""))
        self.vocab, self.name, self.scorer = vocab, name, scorer
        self.prototype, self.learner = learner, None
        self.symbols = self._symbols()
        self.cfg = {"reduced": reduced, "specialise": specialise, "beam_width": beam_width,
                    "softmax_scale": softmax_scale, "foot_classes": make_foot_classes(foot_classes).to_dict(),
                    "spans_key": spans_key, "max_length": max_length}
        self._set_cfg(self.cfg)
        self.inventory = None  # the CP inventory: set by initialize or loading
        self._cache_mb, self.set_cache = CACHE_MB, None  # the preference sets' cache (see initialize)
        self.register_extensions()

    def _set_cfg(self, cfg: dict) -> None:
        """Check and adopt settings (see :meth:`_staged_cfg`)."""
        self.cfg, self.foot_class, self.learner = self._staged_cfg(cfg)

    def _staged_cfg(self, cfg: dict) -> tuple:
        """The settings with those of ``cfg`` in place, checked, with the foot
        classes and the learner they ask for (rebuilt around the prototype
        when ``specialise`` changes, since it decides the learner's shape);
        nothing is set."""
        c = self._merged_cfg(cfg)  # only a save brings unknown keys
        for key in ("reduced", "specialise"):
            if not isinstance(c[key], bool):
                raise StructPrefError(f"{self.name}: {key} must be true or false, got {c[key]!r}")
        from ..incremental.parsing import check_beam_width

        check_beam_width(c["beam_width"], self.name)
        if c["max_length"] is not None:
            check_count(f"{self.name}: max_length (null: no bound)", c["max_length"], 1)
        scale = c["softmax_scale"]
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < float("inf"):
            raise StructPrefError(f"{self.name}: softmax_scale must be a positive number, got {scale!r}")
        check_spans_key(self.name, c["spans_key"])
        from ..incremental.classes import FootClasses

        foot_class = FootClasses(c["foot_classes"])  # checks the map
        learner = self.learner
        if learner is None or c["specialise"] != self.cfg["specialise"]:
            from ..learners.specialised import SpecialisedLearner

            learner = SpecialisedLearner(self.prototype) if c["specialise"] else self.prototype
        return c, foot_class, learner

    def _symbols(self):
        """The SymbolTable to build candidate DAGs with: a perceptron's kernel's
        (its support interns there), else a table of our own."""
        from ..trees.arrays import SymbolTable

        kernel = getattr(self.prototype, "kernel", None)
        if kernel is None:
            return SymbolTable()
        from ..learners.kernels import TreeKernel

        if not isinstance(kernel, TreeKernel):
            raise StructPrefError(f"{self.name}: the candidates are trees: the perceptron needs a tree "
                                  f"kernel (spacy_structpref.TreeKernel.v1), not a {type(kernel).__name__}")
        return kernel.symbols

    @property
    def beam_width(self) -> int:
        return self.cfg["beam_width"]

    @beam_width.setter
    def beam_width(self, width: int) -> None:
        self._set_cfg({"beam_width": width})

    @property
    def softmax_scale(self) -> float:
        return self.cfg["softmax_scale"]

    @softmax_scale.setter
    def softmax_scale(self, scale: float) -> None:
        self._set_cfg({"softmax_scale": scale})

    # ------------------------------------------------------------- training
    def _preference_sets(self, trees: Iterable) -> Tuple[List, List]:
        """``(sets, ids)`` of the trees' preference sets, through the set
        cache (:class:`~spacy_structpref.incremental.SetCache`; a new one
        whenever the inventory, the SymbolTable or the reduction changed)."""
        from ..incremental import SetCache

        cache = self.set_cache
        if cache is None or not cache.serves(self.inventory, self.symbols, self.cfg["reduced"]):
            cache = self.set_cache = SetCache(self.inventory, self.symbols, self.cfg["reduced"],
                                               self._cache_mb << 20)
        return cache.sets(trees)

    def _learn(self, method: str, psets: Sequence, **kwargs):
        """``learner.method(sets, gold, keys, **kwargs)`` on the preference
        sets, their candidates built on access (keys: foot classes, for a
        specialised learner)."""
        from ..incremental import learner_inputs

        return getattr(self.learner, method)(*learner_inputs(psets, self.symbols, self.cfg["reduced"],
                                                             self.cfg["specialise"], self.foot_class), **kwargs)

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *,
                   nlp: Optional[Language] = None, sample_size: int = 200, cache_mb: int = CACHE_MB) -> None:
        """Read the CP inventory off the examples' gold trees and initialize
        the learner on the preference sets of the first ``sample_size``
        trees (0: all), as spaCy initializes a model on a sample: the sets
        fix only the recursive net's label vocabulary (a label first seen
        later is its UNKNOWN label), and a treebank's sets, each with its
        prefix tree, take gigabytes. In a training config:
        ``[initialize.components.attachment_predictor] sample_size = 0``.

        The preference sets of the trees that training and scoring read are
        kept, as arrays of up to ``cache_mb`` MiB in all (the PTB sample's
        train and dev splits take 315), so that each tree's sets are
        built once however many epochs and evaluations read them; 0 keeps
        none."""
        from ..incremental import CPInventory

        validate_get_examples(get_examples, "AttachmentPredictor.initialize")
        if isinstance(sample_size, bool) or not isinstance(sample_size, int) or sample_size < 0:
            raise StructPrefError(f"{self.name}: sample_size must be an integer >= 0, got {sample_size!r}")
        check_count(f"{self.name}: cache_mb", cache_mb, 0)
        self._cache_mb, self.set_cache = cache_mb, None
        trees = self.training_trees(eg.reference for eg in get_examples())
        self.inventory = CPInventory.from_trees(trees)
        self._learn("initialize", self._preference_sets(trees[:sample_size or None])[0])
        self.trained_on = {"tagset": sorted({tag for tree in trees for _, tag in tree.pos()})}
        if nlp is not None:
            self.check_pipeline(nlp)

    def upstream(self, nlp: Language) -> dict:
        """The tagset of the tagger (``distro_tagger``, or spaCy's ``tagger``)
        nearest before it, whose tags it reads; nothing without one (tagged Docs)."""
        taggers = preceding_pipes(nlp, self.name, TAGGERS)
        return {"tagset": sorted(nlp.get_pipe(taggers[-1]).labels)} if taggers else {}

    def require_inventory(self) -> None:
        """Raise a clear error unless the component is trained (has its CP inventory)."""
        if self.inventory is None:
            raise StructPrefError(f"{self.name} is not trained: call nlp.initialize() with treebank "
                                  "examples or load a trained pipeline")

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One learner update on the preference sets of the examples' gold
        trees (``drop`` is unused: the learners have no dropout). The loss
        is the learner's: perceptron mistakes, or the recursive net's summed
        set losses."""
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "AttachmentPredictor.update")
        self.require_inventory()
        psets, ids = self._preference_sets(self.gold_trees(eg.reference for eg in examples))
        if psets:
            step = self._learn("update", psets, ids=ids, sgd=None if sgd is False else sgd, losses={})
            losses[self.name] += sum(step.values())
        return losses

    # ------------------------------------------------------------- parsing
    def utilities(self, candidates, foot: str):
        """The learner's utilities of ``candidates`` (a candidate DAG) for a
        word tagged ``foot``, scored by the foot class's learner under
        ``specialise``."""
        if self.cfg["specialise"]:
            return self.learner.utilities(candidates, self.foot_class(foot))
        return self.learner.utilities(candidates)

    def learner_for(self, foot: str):
        """The learner that scores the candidates of a word tagged ``foot``:
        the foot class's clone under ``specialise``, else the one learner."""
        self.require_inventory()
        if not self.cfg["specialise"]:
            return self.learner
        learner = self.learner.learners.get(self.foot_class(foot))
        if learner is None:
            raise StructPrefError(f"{self.name} has no learner for foot class {self.foot_class(foot)!r}")
        return learner

    def _search_utilities(self, candidates, foot: str):
        """``a·U`` with ``U`` rounded to the learners' tie tolerance
        (``metrics.TIE_TOLERANCE``): mathematically equal utilities then tie
        exactly, and the parser's edit order decides, whatever order the
        kernel summed in (a loaded perceptron interns its support anew, so
        its sums run in another order than the saving one's)."""
        import numpy as np

        from ..learners.metrics import TIE_TOLERANCE

        u = np.asarray(self.utilities(candidates, foot), dtype=float)
        # decimals, not a quantum: the rounded values must not depend on the last bits of max |u|
        decimals = -int(np.ceil(np.log10(TIE_TOLERANCE * (1.0 + np.abs(u).max()))))
        return self.cfg["softmax_scale"] * np.round(u, decimals)

    def predict(self, docs: Iterable[Doc]) -> List:
        """One ``IncrementalParse`` per Doc (None for an empty Doc; the flat
        fallback, every step a fallback, for one longer than ``max_length``)."""
        from ..incremental import IncrementalParser, flat_parse

        self.require_inventory()
        parser = IncrementalParser(self.inventory, lambda cands, foot, i: self._search_utilities(cands, foot),
                                   beam_width=self.cfg["beam_width"], reduced=self.cfg["reduced"],
                                   symbols=self.symbols)
        out = []
        for doc in docs:
            if not len(doc):
                out.append(None)
            elif self._too_long(doc):
                out.append(flat_parse([t.text for t in doc], self._tags(doc)))
            else:
                out.append(parser.parse([t.text for t in doc], self._tags(doc)))
        return out

    def _too_long(self, doc: Doc) -> bool:
        return self.cfg["max_length"] is not None and len(doc) > self.cfg["max_length"]

    def _tags(self, doc: Doc) -> List[str]:
        tags = [t.tag_ for t in doc]
        missing = [t.text for t in doc if not t.tag_]
        if missing:
            raise StructPrefError(
                f"{self.name} reads token.tag_, and {len(missing)} of the Doc's {len(doc)} tokens have "
                f"none (first: {missing[0]!r}): put a tagger (e.g. distro_tagger) before {self.name} in "
                "the pipeline or give it tagged Docs; to evaluate with gold tags in spacy train, add "
                "augmenter = {\"@augmenters\":\"spacy_structpref.gold_tags.v1\"} to the dev corpus")
        return tags

    def set_annotations(self, docs: Iterable[Doc], parses: List) -> None:
        from ..parsing.parser import TOO_LONG
        from ..trees.doc import set_tree

        key = self.cfg["spans_key"]
        for doc, parse in zip(docs, parses):
            if parse is None:
                doc.spans[key] = []
                doc._.attach_fallbacks = 0
                continue
            set_tree(doc, parse.tree, set_tags=False, spans_key=key)
            for token, step in zip(doc, parse.steps):
                token._.attachment = step.to_dict()
            doc._.attach_fallbacks = parse.n_fallbacks
            if self._too_long(doc):
                doc.user_data[FALLBACK_KEY] = TOO_LONG
            else:
                doc.user_data.pop(FALLBACK_KEY, None)

    # ------------------------------------------------------------- scoring
    def _gold_utilities(self, docs: Iterable[Doc]) -> Tuple[List, List]:
        """The learner's utilities of the candidates of every preference set
        of the Docs' gold trees (``doc.spans[spans_key]``), with each set's
        gold index."""
        self.require_inventory()
        utilities, gold = [], []
        for s in self._preference_sets(self.gold_trees(docs))[0]:  # DAGs one at a time: a split's take gigabytes
            utilities.append(self.utilities(s.dag(self.symbols, self.cfg["reduced"]), s.foot))
            gold.append(s.gold)
        return utilities, gold

    def attachment_loss(self, docs: Iterable[Doc], r: Sequence[int] = (1,)) -> Optional[Dict[int, float]]:
        """``{r: L_r}`` of the learner on the preference sets of the Docs'
        gold trees: the fraction of words, from the second on, whose gold
        connection path is not among the ``r`` highest-utility candidates
        given the gold prefix tree (first-pass attachment, Menchetti et al.
        2005, §5); a word whose gold CP type is not in the inventory counts
        as an error. None when there is no set."""
        from ..learners.metrics import loss_at_r

        utilities, gold = self._gold_utilities(docs)
        return loss_at_r(utilities, gold, r) if gold else None

    def fit_softmax_scale(self, docs: Iterable[Doc]) -> float:
        """Set ``softmax_scale`` to the ``a`` that maximises the likelihood
        ``Π p(gold | set)``, ``p ∝ exp(a·U)``, of the preference sets of the
        Docs' gold trees (held-out Docs, e.g. dev: the learner's utilities
        on its own training sets are overconfident), and return it. The
        negative log-likelihood is convex in ``a``; it is minimised over
        ``log a`` in [-7, 7] by golden-section search."""
        import numpy as np

        from ..trees.arrays import offsets

        utilities, gold = self._gold_utilities(docs)
        pairs = [(u, g) for u, g in zip(utilities, gold) if g is not None and len(u) > 1]
        if not pairs:
            raise StructPrefError(f"{self.name}: no preference set with a gold candidate and a rival "
                                  "to fit softmax_scale on")
        u = np.concatenate([u for u, _ in pairs])
        sizes = [len(x) for x, _ in pairs]
        starts = offsets(sizes)[:-1]
        owner = np.repeat(np.arange(len(pairs)), sizes)
        picked = u[starts + np.array([g for _, g in pairs])]

        def nll(log_a: float) -> float:
            z = np.exp(log_a) * u
            top = np.maximum.reduceat(z, starts)
            log_norm = top + np.log(np.add.reduceat(np.exp(z - top[owner]), starts))
            return float(np.sum(log_norm - np.exp(log_a) * picked))

        lo, hi = -7.0, 7.0
        ratio = (np.sqrt(5) - 1) / 2
        for _ in range(60):
            x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
            if nll(x1) <= nll(x2):
                hi = x2
            else:
                lo = x1
        self.softmax_scale = float(np.exp((lo + hi) / 2))
        return self.softmax_scale

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, float]:
        """PARSEVAL of the predicted trees (the scorer, over ``spans_key``);
        ``attach_acc`` = 1 − L_1 of :meth:`attachment_loss` on the reference
        trees (None without any); ``attach_fallbacks``: fallback words of
        the predicted parses; ``attach_too_long``: Docs that got the flat
        tree for being longer than ``max_length``."""
        from ..parsing.parser import TOO_LONG

        examples = list(examples)
        validate_examples(examples, "AttachmentPredictor.score")
        kwargs["spans_key"] = self.cfg["spans_key"]
        scores = dict(self.scorer(examples, **kwargs)) if self.scorer is not None else {}
        loss = self.attachment_loss(eg.reference for eg in examples)
        scores["attach_acc"] = None if loss is None else 1.0 - loss[1]
        scores["attach_fallbacks"] = sum(eg.predicted._.attach_fallbacks or 0 for eg in examples)
        scores["attach_too_long"] = sum(eg.predicted.user_data.get(FALLBACK_KEY) == TOO_LONG for eg in examples)
        return scores

    # ------------------------------------------------------- serialisation
    def _parts(self) -> Dict[str, Part]:
        """``cfg`` (checked, with the foot classes and the learner it asks
        for: :meth:`_staged_cfg`), ``trained_on`` (the tagset of its
        training trees), ``inventory`` and ``learner`` (none before
        training), the learner loaded into the one the loaded cfg asks for
        (a learner loads all or nothing)."""
        from ..incremental import CPInventory

        trained = self.inventory is not None

        def write_inventory(path) -> None:
            if trained:
                path.write_text(self.inventory.to_json(), encoding="utf8")

        def write_learner(path) -> None:
            if trained:
                self.learner.to_disk(path)

        return {"cfg": self._cfg_part(), "trained_on": self._trained_on_part(),
                "inventory": Part(lambda: self.inventory.to_json() if trained else None,
                                  lambda text: None if text is None else CPInventory.from_json(text),
                                  "inventory.json", write_inventory,
                                  lambda p: CPInventory.from_json(p.read_text(encoding="utf8"))),
                "learner": Part(lambda: self.learner.to_bytes() if trained else None,
                                lambda data: None if data is None else lambda learner: learner.from_bytes(data),
                                "learner", write_learner, lambda p: lambda learner: learner.from_disk(p))}

    def _adopt(self, staged: dict) -> None:
        cfg, foot_class, learner = staged.get("cfg", (self.cfg, self.foot_class, self.learner))
        inventory = staged.get("inventory")
        if staged.get("learner") is not None:
            staged["learner"](learner)
        self.cfg, self.foot_class, self.learner = cfg, foot_class, learner
        if inventory is not None:
            self.inventory = inventory
