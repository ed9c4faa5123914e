"""Saving safely: a save is written to a temporary sibling and moved into
place, so an interrupted save never leaves a half-written model or file
(:func:`atomic_directory` for pipeline components and learners,
:func:`atomic_file` for the command line's outputs).

:class:`SavedParts` saves an object (a pipeline component, a learner) in
spaCy's idiom on top of it: a dict of named parts through
``spacy.util.to_bytes``/``from_bytes``/``to_disk``/``from_disk``, each
part one entry of the message or one file of the directory, ``exclude``
naming the parts to leave out, and loading staged so that a refused save
leaves the object as it was.

A saved directory holds a marker file naming what it holds (the component
factory or learner class) and the SHA-256 of every file the save wrote;
:func:`check_saved` refuses a directory saved for something else, a file
that is missing or changed since, and a listed path that leaves the
directory. Like spaCy's ``nlp.to_disk``, saving into an existing directory
keeps what the save does not own: files another program put there stay,
while the files of an earlier save listed in its marker are replaced. A
path that is a file is refused. Temporary directories left by a killed save
are removed by the next save to the same path (saves to one parent
directory take a lock on it, so a save in progress is never taken for one).

The new save takes the old one's place in one step where the system allows
it (Linux's ``renameat2`` with ``RENAME_EXCHANGE``: the path always names a
complete save, the old or the new); elsewhere in two renames, and a save
killed between them leaves the old one aside for the next save to restore.
A reader that must not see the directory replaced while it reads holds the
same lock, shared (:func:`reading`).
"""
import ctypes
import hashlib
import json
import os
import re
import secrets
import shutil
import threading
import warnings
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Collection, Dict, Iterable, Iterator, NamedTuple, Optional, Set

from .errors import SavedModelError, StructPrefError

MARKER = "structpref_component.json"
_DIGEST = re.compile(r"[0-9a-f]{64}")
_held = threading.local()  # parent directories this thread has locked: nested saves into one take it once


def _temp_re(name: str) -> "re.Pattern":
    """A save writes into ``.NAME.saving-HEX``; ``.NAME.replaced-HEX`` holds what it replaces."""
    return re.compile(rf"\.{re.escape(name)}\.(saving|replaced)-[0-9a-f]{{16}}")


def _temp_path(path: Path, kind: str) -> Path:
    return path.with_name(f".{path.name}.{kind}-{secrets.token_hex(8)}")


@contextmanager
def _locked(parent: Path, shared: bool = False) -> Iterator[bool]:
    """Hold a lock on ``parent`` (flock on the directory itself, so no lock
    file is left behind): exclusive for a save, ``shared`` for a reader;
    yields whether it is held. A thread that holds it already (a save or a
    load nested in another) goes on under the lock it holds."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): saves go unlocked and leave stale temporaries alone
        yield False
        return
    held = getattr(_held, "dirs", None)
    if held is None:
        held = _held.dirs = set()
    key = os.path.realpath(parent)
    if key in held:
        yield True
        return
    fd = None
    try:
        fd = os.open(parent, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
    except OSError:  # an unreadable parent, or a file system without flock: go unlocked
        if fd is not None:
            os.close(fd)
        yield False
        return
    held.add(key)
    try:
        yield True
    finally:
        held.discard(key)
        os.close(fd)  # releases the lock


@contextmanager
def reading(path) -> Iterator[Path]:
    """Hold the lock that saves to ``path`` take, shared, and yield the
    resolved path: while it is held no save moves a new directory into
    place, so that what is read comes from one save."""
    path = Path(os.path.realpath(path))
    with _locked(path.parent, shared=True):
        yield path


def _clean_stale(path: Path) -> None:
    """Remove the temporary directories killed saves to ``path`` left; a
    save killed between moving the previous save aside and moving the new
    one in gets the previous one back first."""
    pattern = _temp_re(path.name)
    stale = sorted((p for p in path.parent.iterdir()
                    if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink()),
                   key=lambda p: p.stat().st_mtime)
    if not os.path.lexists(path):
        replaced = [p for p in stale if ".replaced-" in p.name]
        if replaced:
            os.replace(replaced[-1], path)
            stale.remove(replaced[-1])
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file's bytes, read in blocks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(root: Path) -> Iterator[Path]:
    """Every regular file under ``root`` (symbolic links not followed)."""
    for entry in os.scandir(root):
        if entry.is_dir(follow_symlinks=False):
            yield from _files(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            yield Path(entry.path)


def _checksums(root: Path) -> Dict[str, str]:
    top = root / MARKER
    return {p.relative_to(root).as_posix(): file_digest(p) for p in _files(root) if p != top}


def _owned(path: Path) -> Optional[Set[str]]:
    """What an earlier save at ``path`` owns: the files its marker lists;
    None (everything) for a marker written before markers listed files (those
    saves replaced the whole directory); nothing without a readable marker."""
    try:
        saved = _read_marker(path / MARKER)
    except (SavedModelError, OSError):
        return set()
    return None if saved["files"] is None else set(saved["files"]) | {MARKER}


def _link_or_copy(src, dst) -> None:
    try:
        os.link(src, dst)
    except OSError:  # a file system without hard links
        shutil.copy2(src, dst)


def _keep_foreign(path: Path, tmp: Path, ours: Set[str]) -> None:
    """Link (or copy) into ``tmp`` what ``path`` holds that no save of ours
    owns and this save does not write, so that it survives the replacement."""
    owned = _owned(path)
    if owned is None:
        return
    skip = owned | ours | {MARKER}

    def keep(src: Path, rel: str) -> None:
        dst = tmp / rel
        if src.is_dir() and not src.is_symlink():
            if dst.exists() and not dst.is_dir():
                raise SavedModelError(f"cannot save into {path}: its directory {rel} is where the save "
                                      "writes a file; move it away or save elsewhere")
            if not dst.exists() and not any(name.startswith(f"{rel}/") for name in owned):
                shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)  # wholly foreign
                return
            for entry in src.iterdir():
                keep(entry, f"{rel}/{entry.name}")
            return
        if rel in skip:
            return
        if dst.is_dir():
            raise SavedModelError(f"cannot save into {path}: its file {rel} is where the save writes a "
                                  "directory; move it away or save elsewhere")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            _link_or_copy(src, dst)

    for entry in path.iterdir():
        keep(entry, entry.name)


@lru_cache(maxsize=1)
def _renameat2() -> Optional[Callable]:
    """The C library's ``renameat2`` (Linux, glibc 2.28 or later), or None."""
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError, TypeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return function


AT_FDCWD, RENAME_EXCHANGE = -100, 2


def exchange(a: Path, b: Path) -> bool:
    """Swap the paths ``a`` and ``b``, both existing, in one atomic step;
    False (nothing done) where the system or the file system cannot."""
    function = _renameat2()
    if function is None:
        return False
    return function(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0


def _move_in(path: Path, tmp: Path) -> None:
    if not os.path.lexists(path):
        os.replace(tmp, path)
        return
    if exchange(tmp, path):  # tmp now holds the previous save: a kill from here leaves it to _clean_stale
        shutil.rmtree(tmp, ignore_errors=True)
        return
    # Two renames: a save killed between them leaves the previous save in
    # .NAME.replaced-HEX, which the next save to the path puts back.
    old = _temp_path(path, "replaced")
    os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def replaced_directory(path, what: str = "a directory", error: type = StructPrefError) -> Iterator[Path]:
    """Yield a path beside ``path``, not yet made, for a directory to be
    written there (``nlp.to_disk``, ``shutil.copytree``); when the block
    ends without error it replaces ``path`` whole (in one step where the
    system can swap two paths), otherwise it is removed and ``path`` stays
    as it was. A ``path`` that is a file is refused with ``error``, naming
    ``what`` was to be written."""
    path = Path(os.path.realpath(path))  # a symbolic link: write where it points
    if path.exists() and not path.is_dir():
        raise error(f"cannot write {what} to {path}: it is a file, not a directory; remove it or choose "
                    "another path")
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.parent) as locked:
        if locked:
            _clean_stale(path)
        tmp = _temp_path(path, "saving")
        try:
            yield tmp
            _move_in(path, tmp)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def atomic_directory(path, factory: str) -> Iterator[Path]:
    """Yield a temporary directory to write into; on success its files, a
    marker naming ``factory`` and their checksums, and whatever ``path``
    already held that no save of ours wrote, replace ``path``
    (:func:`replaced_directory`). A ``path`` that is a file is refused
    (:class:`~.errors.SavedModelError`)."""
    path = Path(os.path.realpath(path))  # a symbolic link: save where it points
    with replaced_directory(path, f"a {factory}", SavedModelError) as tmp:
        tmp.mkdir()  # os.mkdir's mode, so the umask decides the permissions (mkdtemp's are 0700)
        yield tmp
        files = _checksums(tmp)
        if path.is_dir():
            _keep_foreign(path, tmp, set(files))
        marker = json.dumps({"factory": factory, "files": files}, separators=(",", ":"), sort_keys=True)
        (tmp / MARKER).write_text(marker, encoding="utf-8")


@contextmanager
def load_errors(what: str) -> Iterator[None]:
    """Turn what reading malformed saved data raises (a missing key, a wrong
    type, bytes msgpack or thinc cannot read) into a :class:`~.errors.SavedModelError`
    naming ``what`` was being loaded; the package's own errors pass unchanged."""
    from srsly.msgpack.exceptions import UnpackException  # here: saving itself stays cheap to import

    try:
        yield
    except StructPrefError:
        raise
    except (AttributeError, KeyError, IndexError, TypeError, ValueError, OverflowError, UnpackException) as e:
        raise SavedModelError(f"cannot load {what}: the saved data is malformed ({type(e).__name__}: {e}); "
                              "save it again") from e


def partial_path(path) -> Path:
    """The temporary sibling :func:`atomic_file` writes ``path`` to:
    ``name.part.ext``, so that the extension still tells the file's format."""
    path = Path(path)
    return path.with_name(f"{path.stem}.part{path.suffix}")


@contextmanager
def atomic_file(path) -> Iterator[Path]:
    """Yield :func:`partial_path` of ``path`` to write into; on success it
    replaces ``path`` (``os.replace``, atomic on one file system), on an
    exception it is removed and ``path`` is left as it was."""
    path = Path(path)
    tmp = partial_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def inside(directory, relative: str) -> Path:
    """``directory / relative``, refusing (:class:`~.errors.SavedModelError`)
    a path that is absolute, climbs out with ``..`` or leaves ``directory``
    through a symbolic link: saved names come from files, which may be
    damaged or crafted."""
    directory = Path(directory)
    parts = PurePosixPath(relative).parts if isinstance(relative, str) else None
    if (not parts or PurePosixPath(relative).as_posix() != relative or relative.startswith("/")
            or "\\" in relative or ".." in parts):
        raise SavedModelError(f"{directory}: the saved path {relative!r} is not a name inside the directory")
    target = directory.joinpath(*parts)
    real, root = os.path.realpath(target), os.path.realpath(directory)
    if os.path.commonpath([real, root]) != root:
        raise SavedModelError(f"{directory}: the saved path {relative!r} leads outside the directory")
    return target


def _unique_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key appears twice")
    return dict(pairs)


def _read_marker(marker: Path) -> dict:
    """``{"factory": str, "files": {path: sha256} or None}``; the marker is
    read strictly (exact keys, no repeated key, lower-case digests), so a
    damaged marker is an error rather than a shorter list of files."""
    def damaged(why: str) -> SavedModelError:
        return SavedModelError(f"{marker} is damaged ({why}): save the model again")

    try:
        data = json.loads(marker.read_bytes().decode("utf-8"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError) as e:
        raise damaged(str(e)) from None
    if not isinstance(data, dict) or not isinstance(data.get("factory"), str):
        raise damaged("no factory name")
    if set(data) not in ({"factory"}, {"factory", "files"}):
        raise damaged(f"unexpected keys {sorted(set(data) - {'factory', 'files'})}")
    files = data.get("files")
    if "files" in data and not (isinstance(files, dict) and all(
            isinstance(k, str) and isinstance(v, str) and _DIGEST.fullmatch(v) for k, v in files.items())):
        raise damaged("the file checksums are not a map of names to SHA-256 digests")
    return {"factory": data["factory"], "files": files}


def merged_settings(owner: str, settings: dict, saved: dict, given: Collection[str] = (),
                    runtime: Collection[str] = ()) -> dict:
    """``settings`` with those of ``saved`` in place (unchecked: the owner
    checks the values). A saved key that ``settings`` lacks is refused with a
    :class:`~.errors.SavedModelError`: the save comes from another component
    or version, and dropping the setting silently would change the model.

    ``given``: the keys of ``settings`` the user gave when loading (e.g.
    ``spacy.load(path, config=...)``), which then hold the values given. Of
    those that differ from the saved value, a ``runtime`` setting (one of
    search, decoding or output, which the trained model does not depend on)
    keeps the value given, with a warning naming it; any other shapes the
    trained model and is refused."""
    unknown = set(saved) - set(settings)
    if unknown:
        raise SavedModelError(f"{owner}: unknown saved setting(s) {sorted(unknown)}")
    merged = {**settings, **saved}
    changed = sorted(key for key in set(given) & set(saved) if settings[key] != saved[key])
    fixed = [f"{key} = {settings[key]!r} (saved: {saved[key]!r})" for key in changed if key not in runtime]
    if fixed:
        raise SavedModelError(f"{owner}: {'; '.join(fixed)} given at load: the trained model depends on "
                              f"{'this setting' if len(fixed) == 1 else 'these settings'}, so a save loads only "
                              "with the values it was trained with; leave them out when loading")
    for key in changed:
        warnings.warn(f"{owner}: {key} = {settings[key]!r} given at load replaces the saved {saved[key]!r}",
                      stacklevel=2)
        merged[key] = settings[key]
    return merged


def check_saved(path, factory: str) -> Path:
    """Raise a clear error (:class:`~.errors.SavedModelError`) unless
    ``path`` holds a saved ``factory`` whose files all match the checksums
    saved with them; return ``path``."""
    path = Path(path)
    marker = path / MARKER
    if not marker.is_file():
        why = f"no {MARKER}"
        if not path.exists() and path.parent.is_dir():
            left = [p.name for p in path.parent.iterdir()
                    if _temp_re(path.name).fullmatch(p.name) and ".replaced-" in p.name]
            if left:
                why += (f"; a save there was interrupted and the previous one is in {path.parent / left[0]}: "
                        "saving again to the path restores it first")
        raise SavedModelError(f"{path} does not hold a saved {factory} ({why})")
    saved = _read_marker(marker)
    if saved["factory"] != factory:
        raise SavedModelError(f"{path} holds a saved {saved['factory']}, not a {factory}: it was loaded "
                              "into the wrong pipeline component or learner")
    if saved["files"] is None:
        warnings.warn(f"{path} was saved without file checksums (by an earlier spacy-structpref): its files "
                      "cannot be verified; save it again to add them", stacklevel=2)
        return path
    for name, digest in sorted(saved["files"].items()):
        file = inside(path, name)
        if file.is_symlink() or not file.is_file():
            raise SavedModelError(f"{file} is missing from the saved {factory}: save the model again")
        if file_digest(file) != digest:
            raise SavedModelError(f"{file} does not match the checksum saved with it: the file is damaged or "
                                  f"was changed after saving; save the {factory} again")
    return path


class Part(NamedTuple):
    """One saved part of an object, under the name ``exclude`` takes.
    ``get()``: its msgpack-ready value (an entry of ``to_bytes``);
    ``put(value)``: loads such a value, staged (what it returns is the
    owner's, see :meth:`SavedParts._load`). In a saved directory it is
    ``file`` (default ``NAME.msgpack``; spaCy's ``exclude`` matches the name
    before the first dot), written by ``write(path)`` and loaded by
    ``read(path)``, staged as ``put`` is (default: the value as msgpack)."""
    get: Callable[[], Any]
    put: Callable[[Any], Any]
    file: Optional[str] = None
    write: Optional[Callable[[Path], None]] = None
    read: Optional[Callable[[Path], Any]] = None

    def completed(self, name: str) -> "Part":
        """The part with the defaults of its file filled in (``name``: the part's)."""
        import srsly  # here: saving itself stays cheap to import

        return self._replace(file=self.file or f"{name}.msgpack",
                             write=self.write or (lambda path: srsly.write_msgpack(path, self.get())),
                             read=self.read or (lambda path: self.put(srsly.read_msgpack(path))))



class SavedParts:
    """``to_bytes``/``from_bytes``/``to_disk``/``from_disk`` with ``exclude``,
    as spaCy's pipes save, over the parts :meth:`_parts` names: bytes are one
    msgpack message of the parts' values, a directory holds one file per
    part, written atomically with a marker naming :attr:`saved_as` and the
    files' checksums (:func:`atomic_directory`), checked before anything is
    read (:func:`check_saved`). A part that ``exclude`` names, or that the
    save lacks, keeps its state. What reading malformed data raises becomes a
    :class:`~.errors.SavedModelError` naming :attr:`loaded_as` (:func:`load_errors`)."""

    @property
    def saved_as(self) -> str:
        """The name in the marker of a saved directory: a save loads only into its own kind."""
        raise NotImplementedError

    @property
    def loaded_as(self) -> str:
        """What the errors of a refused load name."""
        return self.saved_as

    def _parts(self) -> Dict[str, Part]:
        """The parts of the saved state, in loading order (a ``(get, put)``
        pair stands for a part with the default file)."""
        raise NotImplementedError

    def _load(self, load: Callable[[Dict[str, Part]], None]) -> None:
        """Run ``load(parts)``, which calls the ``put`` or ``read`` of every
        saved part not excluded, so that a refused save leaves the object
        as it was (how depends on the owner: staged into a copy, or into a
        dict adopted at the end)."""
        raise NotImplementedError

    def _before_saving(self) -> None:
        """Bring the state to what is saved (e.g. finish training)."""

    def _completed_parts(self) -> Dict[str, Part]:
        return {name: Part(*part).completed(name) for name, part in self._parts().items()}

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        """The parts not in ``exclude``, as one msgpack message."""
        from spacy import util

        self._before_saving()
        return util.to_bytes({name: part.get for name, part in self._completed_parts().items()}, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()):
        """Load what ``to_bytes`` saved."""
        from spacy import util

        with load_errors(self.loaded_as):
            self._load(lambda parts: util.from_bytes(
                bytes_data, {name: part.put for name, part in parts.items()}, exclude))
        return self

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        """Save atomically, one file (or directory) per part not in ``exclude``."""
        from spacy import util

        self._before_saving()
        parts = self._completed_parts()
        with atomic_directory(path, self.saved_as) as tmp:
            util.to_disk(tmp, {part.file: part.write for part in parts.values()}, exclude)

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()):
        """Load what ``to_disk`` saved, once its marker and checksums are checked."""
        from spacy import util

        path = check_saved(path, self.saved_as)
        with load_errors(f"{self.loaded_as} from {path}"):
            self._load(lambda parts: util.from_disk(
                path, {part.file: _if_saved(part.read)
                       for part in (Part(*part).completed(name) for name, part in parts.items())}, exclude))
        return self


def _if_saved(read: Callable[[Path], Any]) -> Callable[[Path], None]:
    """``read`` for a part the save holds (one it left out keeps its state, as in ``from_bytes``)."""
    def reader(path: Path) -> None:
        if path.exists():
            read(path)

    return reader
