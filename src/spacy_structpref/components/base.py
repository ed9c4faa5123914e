"""What the pipeline components share, written once.

:class:`StructPrefPipe`, the base of every component: saving in spaCy's
idiom (a dict of named parts through ``spacy.util``, ``exclude`` honoured
for each, see :class:`~spacy_structpref.saving.SavedParts`) on the atomic,
checksummed and marker-checked saving layer, with loading staged: each part
read and checked into a dict, adopted by the component's ``_adopt`` only once
every part has loaded, so that a refused save leaves the component as it
was. Besides: the ``spans_key`` check, the gold trees of ``spans_key``, the
``._`` attributes a component writes, and finding a component by factory.

:class:`LearnerPipe` adds what a component trained through a preference
learner (``self.learner``) needs in spaCy's training loop: ``update`` goes
to the learner, spaCy's optimizer steps the learner's Thinc networks (its
:attr:`~LearnerPipe.model`, none for a perceptron) through the learner's
``finish_update`` and averages them through its ``use_params``.

Nothing compiled is imported here: the factories stay cheap to import.
"""
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional

import srsly
from spacy.language import Language
from spacy.pipeline import Pipe, TrainablePipe
from spacy.tokens import Doc, Token
from thinc.api import Model

from ..errors import StructPrefError
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


def preceding_pipe(nlp: Language, name: str, factory: str, uses: str) -> str:
    """The name of the nearest component made by ``factory`` before component
    ``name`` in ``nlp`` (disabled ones included); a clear error when there is
    none. ``uses`` says what ``name`` takes from it ("reranks the k-best lists")."""
    names = list(nlp.component_names)
    if name not in names:
        raise StructPrefError(f"{name} is not a component of this pipeline ({names})")
    found = [n for n in names[:names.index(name)] if nlp.get_pipe_meta(n).factory == factory]
    if not found:
        raise StructPrefError(f"{name} {uses} of a {factory}, and no {factory} "
                              f"precedes it in the pipeline {names}: add one before it")
    return found[-1]


class StructPrefPipe(SavedParts, Pipe):
    """The base of the package's components; see the module docstring.

    A component sets ``factory`` (its factory's name, which also marks its
    saves), lists the ``._`` attributes it writes (``doc_extensions``,
    ``token_extensions``: default None) and defines ``_parts`` (each part's
    ``put``/``read`` returns the part's staged value, checked as far as the
    part alone allows) and ``_adopt``."""

    factory = ""
    doc_extensions: tuple = ()
    token_extensions: tuple = ()

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

    # -- saving ---------------------------------------------------------------
    def _parts(self) -> Dict[str, Part]:
        raise NotImplementedError

    def _check_cfg(self, cfg: dict) -> None:
        """Raise a clear error for a bad setting of ``cfg``."""

    def _staged_cfg(self, saved: dict) -> Any:
        """The settings with those of ``saved`` in place (a key this
        component lacks is refused: :func:`~..saving.merged_settings`), checked."""
        cfg = merged_settings(self.name, self.cfg, saved)
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
