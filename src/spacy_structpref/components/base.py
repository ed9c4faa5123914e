"""What the pipeline components share, written once.

:class:`StructPrefPipe`, the base of every component: saving in spaCy's
idiom (a dict of named parts through ``spacy.util``, ``exclude`` honoured
for each, see :class:`~spacy_structpref.saving.SavedParts`) on the atomic,
checksummed and marker-checked saving layer, with loading staged: each part
read and checked into a dict, adopted by the component's ``_adopt`` only once
every part has loaded, so that a refused save leaves the component as it
was. Besides: the ``spans_key`` check, the gold trees of ``spans_key``, the
``._`` attributes a component writes, and finding a component by factory.

Two things tie a component to the pipeline it is loaded into. Settings given
at load (``spacy.load(path, config=...)``, passed on by
:mod:`.pipeline`) replace the saved ones where they are of search, decoding
or output (``runtime_settings``), with a warning, and are refused where the
trained model depends on them (:func:`~spacy_structpref.saving.merged_settings`).
And a component trained on what another component gives (a reranker on a
parser's k-best lists, an incremental parser on a tagset) records the
identity of that input (``trained_on``, saved with it) and refuses, in
:meth:`StructPrefPipe.check_pipeline`, a pipeline whose input differs.

:class:`LearnerPipe` adds what a component trained through a preference
learner (``self.learner``) needs in spaCy's training loop: ``update`` goes
to the learner, spaCy's optimizer steps the learner's Thinc networks (its
:attr:`~LearnerPipe.model`, none for a perceptron) through the learner's
``finish_update`` and averages them through its ``use_params``.

Nothing compiled is imported here: the factories stay cheap to import.
"""
import re
from contextlib import contextmanager
from typing import Any, Callable, Collection, Dict, Iterable, Iterator, List, Optional

import srsly
from spacy.language import Language
from spacy.pipeline import Pipe, TrainablePipe
from spacy.tokens import Doc, Token
from thinc.api import Model

from ..errors import SavedModelError, StructPrefError
from ..saving import Part, SavedParts, merged_settings


def check_spans_key(owner: str, key) -> None:
    """A span group name: a non-empty string."""
    if not isinstance(key, str) or not key:
        raise StructPrefError(f"{owner}: spans_key must be a non-empty string, got {key!r}")


def find_pipe(nlp: Language, factory: str) -> Pipe:
    """The pipeline's first component made by ``factory`` (a clear error if it has none)."""
    names = [name for name in nlp.pipe_names if nlp.get_pipe_meta(name).factory == factory]
    if not names:
        raise StructPrefError(f"the pipeline has no {factory} component (pipes: {nlp.pipe_names})")
    return nlp.get_pipe(names[0])


def preceding_pipes(nlp: Language, name: str, factories: Collection[str]) -> List[str]:
    """The names of the components made by one of ``factories`` before
    component ``name`` in ``nlp`` (disabled ones included), nearest last;
    none when ``name`` is not in ``nlp``."""
    names = list(nlp.component_names)
    if name not in names:
        return []
    return [n for n in names[:names.index(name)] if nlp.get_pipe_meta(n).factory in factories]


def preceding_pipe(nlp: Language, name: str, factory: str, uses: str) -> str:
    """The name of the nearest component made by ``factory`` before component
    ``name`` in ``nlp`` (disabled ones included); a clear error when there is
    none. ``uses`` says what ``name`` takes from it ("reranks the k-best lists")."""
    names = list(nlp.component_names)
    if name not in names:
        raise StructPrefError(f"{name} is not a component of this pipeline ({names})")
    found = preceding_pipes(nlp, name, (factory,))
    if not found:
        raise StructPrefError(f"{name} {uses} of a {factory}, and no {factory} "
                              f"precedes it in the pipeline {names}: add one before it")
    return found[-1]


class StructPrefPipe(SavedParts, Pipe):
    """The base of the package's components; see the module docstring.

    A component sets ``factory`` (its factory's name, which also marks its
    saves), lists the ``._`` attributes it writes (``doc_extensions``,
    ``token_extensions``: default None) and its ``runtime_settings`` (the
    keys of ``cfg`` that a value given at load replaces), and defines
    ``_parts`` (each part's ``put``/``read`` returns the part's staged
    value, checked as far as the part alone allows) and ``_adopt``; one
    trained on another component's output defines :meth:`upstream` and
    saves :meth:`_trained_on_part`."""

    factory = ""
    doc_extensions: tuple = ()
    token_extensions: tuple = ()
    runtime_settings: tuple = ()
    # {what: identity} of the input it was trained on (see upstream); None: nothing recorded
    trained_on: Optional[Dict[str, Any]] = None
    _given: frozenset = frozenset()  # the settings given at load, while loading

    @property
    def saved_as(self) -> str:
        return self.factory

    @property
    def loaded_as(self) -> str:
        return self.name

    def register_extensions(self) -> None:
        """The tree attributes (``doc._.parse``, ...) and this component's own (idempotent)."""
        from ..trees import register_extensions

        register_extensions()
        for cls, names in ((Doc, self.doc_extensions), (Token, self.token_extensions)):
            for name in names:
                if not cls.has_extension(name):
                    cls.set_extension(name, default=None)

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations([doc], self.predict([doc]))
        return doc

    # -- gold trees -----------------------------------------------------------
    def gold_trees(self, docs: Iterable[Doc], *, top: bool = False) -> List:
        """The trees of the Docs' span group ``cfg["spans_key"]`` (a Doc
        without one is left out); ``top``: each under a ``TOP`` root if it
        lacks one, as the parser's trees are."""
        from nltk.tree import Tree

        from ..trees.doc import doc_to_tree

        trees = (doc_to_tree(doc, self.cfg["spans_key"]) for doc in docs)
        return [Tree("TOP", [t]) if top and t.label() != "TOP" else t for t in trees if t is not None]

    def training_trees(self, docs: Iterable[Doc], *, top: bool = False) -> List:
        """:meth:`gold_trees`, refusing training data without any."""
        trees = self.gold_trees(docs, top=top)
        if not trees:
            raise StructPrefError(
                f"{self.name}: no training example has constituents in doc.spans[{self.cfg['spans_key']!r}] "
                "(convert the treebank with `python -m spacy_structpref convert ptb corpus/ptb`)")
        return trees

    # -- the pipeline ---------------------------------------------------------
    def upstream(self, nlp: Language) -> Dict[str, Any]:
        """The identities, ``{what: identity}``, of what this component's
        training depends on in ``nlp`` now (compared with :attr:`trained_on`);
        what ``nlp`` lacks is left out. By default: nothing."""
        return {}

    def check_pipeline(self, nlp: Language) -> None:
        """Raise a clear error when ``nlp`` gives this component another
        input than the one it was trained on (:attr:`trained_on` against
        :meth:`upstream`): a pipeline put together from different trainings."""
        if not self.trained_on:
            return
        now = self.upstream(nlp)
        for what, identity in self.trained_on.items():
            if what in now and now[what] != identity:
                raise StructPrefError(
                    f"{self.name} was trained on another {what} than this pipeline's "
                    f"({_difference(identity, now[what])}): the pipeline was put together from different "
                    f"trainings; train {self.name} again in this pipeline (nlp.initialize), or load the "
                    "pipeline it was saved with")

    def _trained_on_part(self) -> Part:
        """:attr:`trained_on` as ``trained_on.json`` (``null``: nothing recorded)."""
        return Part(lambda: self.trained_on, _checked_trained_on, "trained_on.json",
                    lambda path: srsly.write_json(path, self.trained_on),
                    lambda path: _checked_trained_on(srsly.read_json(path)))

    # -- saving ---------------------------------------------------------------
    def _parts(self) -> Dict[str, Part]:
        raise NotImplementedError

    @contextmanager
    def settings_given_at_load(self, keys: Collection[str]) -> Iterator[None]:
        """Load, within the block, as with the settings ``keys`` given by the
        user (their values are this component's, built from the config with
        them): a runtime one replaces the saved value, any other must equal it
        (:func:`~..saving.merged_settings`)."""
        self._given = frozenset(keys)
        try:
            yield
        finally:
            self._given = frozenset()

    def _merged_cfg(self, saved: dict) -> dict:
        """``saved`` merged into the settings, with those given at load (:func:`~..saving.merged_settings`)."""
        return merged_settings(self.name, self.cfg, saved, self._given, self.runtime_settings)

    def _check_cfg(self, cfg: dict) -> None:
        """Raise a clear error for a bad setting of ``cfg``."""

    def _staged_cfg(self, saved: dict) -> Any:
        """The settings with those of ``saved`` in place (a key this
        component lacks is refused: :meth:`_merged_cfg`), checked."""
        cfg = self._merged_cfg(saved)
        self._check_cfg(cfg)
        return cfg

    def _cfg_part(self) -> Part:
        """``cfg`` as a dict in bytes, ``cfg.json`` on disk, staged by :meth:`_staged_cfg`."""
        return Part(lambda: self.cfg, self._staged_cfg, "cfg.json", lambda path: srsly.write_json(path, self.cfg),
                    lambda path: self._staged_cfg(srsly.read_json(path)))

    def _adopt(self, staged: Dict[str, Any]) -> None:
        """Check the staged parts against each other and the component (a
        part not loaded is absent), load what loads in place, then set them.
        Raises before setting anything."""
        raise NotImplementedError

    def _load(self, load: Callable[[Dict[str, Part]], None]) -> None:
        """``load`` stages each part's value into a dict; :meth:`_adopt` takes them."""
        staged: Dict[str, Any] = {}

        def into(name: str, stage: Callable[[Any], Any]) -> Callable[[Any], None]:
            def put(value) -> None:
                staged[name] = stage(value)

            return put

        parts = {}
        for name, part in self._parts().items():
            part = part.completed(name)
            parts[name] = part._replace(put=into(name, part.put), read=into(name, part.read))
        load(parts)
        self._adopt(staged)
        if "trained_on" in staged:
            self.trained_on = staged["trained_on"]


def _difference(trained, now) -> str:
    """How an input's identity at training (a tag list, or a digest) differs from ``now``."""
    if isinstance(trained, list) and isinstance(now, list):
        extra, missing = sorted(set(now) - set(trained)), sorted(set(trained) - set(now))
        return "; ".join(part for part in (extra and f"tags it never saw: {extra}",
                                           missing and f"tags it was trained on missing: {missing}") if part)
    return f"SHA-256 {str(trained)[:12]}… when trained, {str(now)[:12]}… here"


def _checked_trained_on(saved) -> Optional[Dict[str, Any]]:
    """A saved :attr:`StructPrefPipe.trained_on`: null, or names mapped to a
    SHA-256 digest or a list of tags."""
    def identity(value) -> bool:
        if isinstance(value, str):
            return re.fullmatch(r"[0-9a-f]{64}", value) is not None
        return isinstance(value, list) and all(isinstance(tag, str) for tag in value)

    if saved is None:
        return None
    if not isinstance(saved, dict) or not all(isinstance(k, str) and identity(v) for k, v in saved.items()):
        raise SavedModelError(f"the saved trained_on must map names to a SHA-256 digest or a list of tags, "
                              f"got {saved!r}")
    return saved


def learner_networks(learner) -> List[Model]:
    """The Thinc networks of a learner, the weights a caller's optimizer
    steps: a recursive network's ``model``, and those of the learners it
    holds (an ensemble's ``members``, a specialised learner's ``learners``);
    none for a kernel perceptron, which learns in ``update`` itself."""
    own = getattr(learner, "model", None)
    held = list(getattr(learner, "members", ())) + list(getattr(learner, "learners", {}).values())
    return ([own] if isinstance(own, Model) else []) + [net for inner in held for net in learner_networks(inner)]


def _networks_forward(model: Model, X, is_train: bool):
    raise StructPrefError("the learner scores candidates itself: its networks are held together for the "
                          "optimizer only")


class LearnerPipe(StructPrefPipe, TrainablePipe):
    """A component trained through the preference learner ``self.learner``
    (see the module docstring). Subclasses define ``update`` (the learner's
    update on the sets of a batch, ``sgd=None`` leaving the gradients to
    :meth:`finish_update`)."""

    learner: Any

    @property
    def model(self) -> Optional[Model]:
        """The learner's Thinc networks (:func:`learner_networks`): the one,
        or several held by one Model; None when it has none, and then spaCy
        has nothing to step."""
        networks = learner_networks(self.learner)
        if len(networks) < 2:
            return networks[0] if networks else None
        return Model("learner_networks", _networks_forward, layers=networks)

    def finish_update(self, sgd) -> None:
        """Apply the gradients the learner accumulated (its ``finish_update``)."""
        self.learner.finish_update(sgd)

    def use_params(self, params: dict) -> Iterator[None]:
        """Predict and save with ``params`` (e.g. the optimizer's averages) in
        place; a generator, as spaCy's ``Language.use_params`` drives it."""
        with self.learner.use_params(params):
            yield
