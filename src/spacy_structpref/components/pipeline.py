"""A spaCy pipeline that holds the package's components, saved and loaded
as a whole: ``nlp.to_disk`` never leaves a half-written or mixed
directory, ``spacy.load`` never reads parts of two saves, settings given
at load reach the components, and a pipeline put together from different
trainings is refused.

spaCy's ``Language.to_disk`` writes each part (``config.cfg``, ``meta.json``,
the tokenizer, the vocab, every component) in place, one after the other, and
``spacy.load`` reads ``meta.json`` and ``config.cfg``, builds the pipeline,
then reads every part again through ``Language.from_disk``. Each factory of
the package therefore installs a :class:`PipelineGuard` on the ``Language``
it builds a component for (:func:`guard_pipeline`): its own ``to_disk`` and
``from_disk`` in place of spaCy's on that object, so that what a user calls,
``nlp.to_disk`` and ``spacy.load``, is what is made safe.

- ``to_disk`` checks the pipeline (:meth:`StructPrefPipe.check_pipeline`),
  then writes it with spaCy's own ``to_disk`` into a fresh hidden sibling
  directory, adds a save id to ``meta.json`` and, last, a marker with the
  SHA-256 of every file, and swaps the directory into place
  (:func:`~spacy_structpref.saving.atomic_directory`: one atomic exchange
  on Linux, the old save removed only after; under an exclusive lock on
  the parent directory).
- ``from_disk`` holds the same lock, shared, while it reads, so no save is
  swapped in meanwhile; checks every file against the marker (a changed or
  missing file of spaCy's own parts is refused as one of a component's is);
  hands each component the settings given at load; then checks the
  pipeline. ``spacy.load`` read ``meta.json`` and ``config.cfg`` before the
  lock: if the save id it built the pipeline from is not the one on disk
  under the lock, a save was swapped in between, and the pipeline is built
  again from the directory as it is now.
"""
import json
import secrets
from contextlib import ExitStack
from typing import Dict, Iterable, Iterator, Set, Tuple

from spacy import util
from spacy.language import Language

from ..errors import SavedModelError
from ..saving import MARKER, atomic_directory, check_saved, reading
from .base import StructPrefPipe

PIPELINE = "pipeline"  # the name a whole pipeline's marker gives
SAVE_ID = "structpref_save_id"  # the key of meta.json that names the save


def structpref_pipes(nlp: Language) -> Iterator[Tuple[str, StructPrefPipe]]:
    """``(name, component)`` of the package's components in ``nlp``, disabled ones included."""
    return ((name, pipe) for name, pipe in nlp.components if isinstance(pipe, StructPrefPipe))


def check_pipeline(nlp: Language) -> None:
    """Raise a clear error when a component of the package in ``nlp`` was
    trained on an input this pipeline does not give it (:meth:`StructPrefPipe.check_pipeline`)."""
    for _, pipe in structpref_pipes(nlp):
        pipe.check_pipeline(nlp)


def given_settings(overrides: Dict[str, object], name: str) -> Set[str]:
    """The settings of component ``name`` that spaCy's load ``overrides``
    (dotted keys, ``components.NAME.KEY...``) give."""
    prefix = f"components.{name}."
    return {key[len(prefix):].split(".")[0] for key in overrides if key.startswith(prefix)}


class PipelineGuard:
    """``to_disk`` and ``from_disk`` of one ``Language`` (see the module
    docstring); spaCy's own methods of its class do the writing and reading."""

    def __init__(self, nlp: Language):
        self.nlp = nlp
        self.fresh = True  # built, nothing saved or loaded yet: what spacy.load hands from_disk

    def to_disk(self, path, *, exclude: Iterable[str] = util.SimpleFrozenList()) -> None:
        """Save the pipeline as spaCy's ``Language.to_disk`` does, as a whole."""
        nlp = self.nlp
        check_pipeline(nlp)
        with atomic_directory(util.ensure_path(path), PIPELINE) as tmp:
            type(nlp).to_disk(nlp, tmp, exclude=exclude)
            meta = tmp / "meta.json"
            if meta.is_file():
                data = json.loads(meta.read_text(encoding="utf8"))
                data[SAVE_ID] = secrets.token_hex(16)
                meta.write_text(json.dumps(data, indent=2), encoding="utf8")
        self.fresh = False

    def from_disk(self, path, *, exclude: Iterable[str] = util.SimpleFrozenList(),
                  overrides: Dict[str, object] = util.SimpleFrozenDict()) -> Language:
        """Load the pipeline as spaCy's ``Language.from_disk`` does, from one
        save; see the module docstring."""
        nlp = self.nlp
        with reading(util.ensure_path(path)) as path:
            if (path / MARKER).is_file():
                try:
                    check_saved(path, PIPELINE)
                except SavedModelError as e:
                    raise SavedModelError(f"{e} (a file edited on purpose: delete {path / MARKER} to load the "
                                          "pipeline unchecked)") from None
            built_from = nlp.meta.get(SAVE_ID)
            if self.fresh and built_from is not None and built_from != _save_id(path):
                self.fresh = False
                return util.load_model_from_path(path, disable=nlp.disabled, exclude=exclude,
                                                 config=util.dot_to_dict(dict(overrides)))
            with ExitStack() as stack:
                for name, pipe in structpref_pipes(nlp):
                    stack.enter_context(pipe.settings_given_at_load(given_settings(overrides, name)))
                type(nlp).from_disk(nlp, path, exclude=exclude, overrides=overrides)
            check_pipeline(nlp)
        self.fresh = False
        return nlp


def _save_id(path) -> object:
    meta = path / "meta.json"
    return json.loads(meta.read_text(encoding="utf8")).get(SAVE_ID) if meta.is_file() else None


def guard_pipeline(nlp: Language) -> None:
    """Make ``nlp.to_disk`` and ``nlp.from_disk`` those of a :class:`PipelineGuard`
    (once per ``Language``): every factory of the package calls it on the
    pipeline it builds a component for, and a pipeline whose components of
    the package were all copied from another (``add_pipe(source=...)``) can
    call it itself."""
    if not isinstance(getattr(nlp.to_disk, "__self__", None), PipelineGuard):
        guard = PipelineGuard(nlp)
        nlp.to_disk, nlp.from_disk = guard.to_disk, guard.from_disk
