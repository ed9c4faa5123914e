"""A kernel SVM text classifier over parsed Docs: a Doc kernel
(:mod:`.kernels`) and one-vs-others SVMs (:mod:`.svm`), C chosen on
held-out Docs (every ``dev_every``-th training Doc) and the SVMs refit on
all of them; it keeps only its support items, their dual coefficients and
the intercepts, and saves them as plain arrays (``.npy`` read with
``allow_pickle=False``) and msgpack data, never pickles."""
import hashlib
import io
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import srsly

from ..errors import SavedModelError, StructPrefError
from ..kernels.inputs import check_threads
from .svm import OneVsRest, check_C, dev_mask, fit_tuned

FORMAT_VERSION = 1
ARRAYS = ("coef", "intercept")  # saved as {name}.npy


class KernelClassifier:
    """``kernel``: a Doc kernel; ``C_grid``: the SVM's C, chosen on the
    held-out Docs when the grid has more than one value; ``dev_every``:
    every n-th training Doc is held out for that choice; ``n_threads``:
    binary SVMs trained at once."""

    def __init__(self, kernel, C_grid: Sequence[float] = (1.0,), dev_every: int = 10, n_threads: int = 1):
        self.kernel = kernel
        self.C_grid = [check_C(c) for c in C_grid]
        dev_mask(0, dev_every)  # checks it
        self.dev_every = dev_every
        self.n_threads = check_threads(n_threads)
        self.labels: List[str] = []
        self.model: Optional[OneVsRest] = None
        self.support_items: list = []
        self.C: Optional[float] = None
        self.dev_scores: Dict[float, float] = {}
        self.timings: Dict[str, float] = {}
        self._support_prepared = None

    @property
    def is_trained(self) -> bool:
        return self.model is not None

    @property
    def held_out_accuracy(self) -> Optional[float]:
        """The accuracy of the chosen C on the held-out Docs, measured before
        the SVMs were refit on all of them (None when no C was chosen)."""
        return self.dev_scores.get(self.C) if self.C is not None else None

    # ------------------------------------------------------------ training
    def fit(self, docs, gold: Sequence[str], labels: Optional[Sequence[str]] = None,
            progress: bool = True) -> "KernelClassifier":
        """Train on parsed Docs with their classes ``gold``."""
        docs = list(docs)
        self.kernel.fit(docs)
        items = self.kernel.items(docs)
        t = time.perf_counter()
        prepared = self.kernel.prepare(items)
        K = self.kernel.gram(prepared, None, progress)
        self.timings["gram"] = time.perf_counter() - t
        return self.fit_gram(K, items, gold, labels, progress)

    def fit_gram(self, K: np.ndarray, items: list, gold: Sequence[str], labels: Optional[Sequence[str]] = None,
                 progress: bool = True) -> "KernelClassifier":
        """Train from the Gram matrix ``K`` of ``items`` (the kernel's items
        of the training Docs)."""
        gold = list(gold)
        if len(gold) != len(items) or K.shape != (len(items), len(items)):
            raise StructPrefError(f"{len(items)} items, {len(gold)} classes and a Gram matrix of shape {K.shape}")
        labels = sorted(set(gold)) if labels is None else list(labels)
        index = {label: i for i, label in enumerate(labels)}
        unknown = sorted(set(gold) - set(index))
        if unknown:
            raise StructPrefError(f"class(es) {unknown} are not among the labels {labels}")
        y = np.array([index[g] for g in gold])
        held_out = dev_mask(len(y), self.dev_every) if len(self.C_grid) > 1 else None
        t = time.perf_counter()
        self.model, self.C, self.dev_scores = fit_tuned(K, y, len(labels), self.C_grid, held_out,
                                                        self.n_threads, progress)
        self.timings["svm"] = time.perf_counter() - t
        self.labels = labels
        self.support_items = [items[i] for i in self.model.support]
        self._support_prepared = None
        return self

    # ---------------------------------------------------------- prediction
    def _check_trained(self) -> None:
        if self.model is None:
            raise StructPrefError("the kernel classifier is not trained: call nlp.initialize() with labelled "
                                  "examples, or load a trained pipeline")

    def support_prepared(self):
        if self._support_prepared is None:
            self._support_prepared = self.kernel.prepare(self.support_items)
        return self._support_prepared

    def decision(self, docs, progress=False) -> np.ndarray:
        """Margins (Docs × labels): kernel rows against the support items only."""
        self._check_trained()
        docs = list(docs)
        if not docs:
            return np.zeros((0, len(self.labels)))
        prepared = self.kernel.prepare(self.kernel.items(docs))
        return self.model.decision(self.kernel.gram(prepared, self.support_prepared(), progress))

    def predict(self, docs) -> List[str]:
        return [self.labels[i] for i in np.argmax(self.decision(docs), axis=1)]

    # -------------------------------------------------------------- saving
    def state(self) -> dict:
        """Everything but the arrays, msgpack-ready."""
        self._check_trained()
        return {"version": FORMAT_VERSION, "labels": self.labels, "C": self.C,
                "dev_scores": [[c, s] for c, s in self.dev_scores.items()],
                "kernel": self.kernel.settings(), "kernel_state": self.kernel.state(),
                "support": self.kernel.encode(self.support_items)}

    def arrays(self) -> Dict[str, np.ndarray]:
        self._check_trained()
        return {"coef": self.model.coef, "intercept": self.model.intercept}

    def load_state(self, state: dict, arrays: Dict[str, np.ndarray]) -> "KernelClassifier":
        """Restore from :meth:`state` and :meth:`arrays`, checked against this
        classifier's kernel and for consistent shapes."""
        if state.get("version") != FORMAT_VERSION:
            raise SavedModelError(f"saved kernel classifier of format {state.get('version')!r}, expected "
                                  f"{FORMAT_VERSION}")
        if state["kernel"] != self.kernel.settings():
            raise SavedModelError(f"the saved classifier was trained with the kernel {state['kernel']}, but this "
                                  f"component is configured with {self.kernel.settings()}")
        labels = list(state["labels"])
        if not all(isinstance(label, str) for label in labels) or len(set(labels)) != len(labels):
            raise SavedModelError(f"the saved classifier's labels must be distinct strings, got {labels!r}")
        support = self.kernel.decode(state["support"])
        coef, intercept = (np.asarray(arrays[k]) for k in ARRAYS)
        if (coef.dtype != np.float64 or intercept.dtype != np.float64 or coef.shape != (len(labels), len(support))
                or intercept.shape != (len(labels),)):
            raise SavedModelError(f"saved arrays coef {coef.dtype}{coef.shape} and intercept "
                                  f"{intercept.dtype}{intercept.shape} do not fit {len(labels)} labels and "
                                  f"{len(support)} support items")
        if not (np.isfinite(coef).all() and np.isfinite(intercept).all()):
            raise SavedModelError("saved SVM coefficients are not finite")
        C, dev_scores = float(state["C"]), {float(c): float(s) for c, s in state["dev_scores"]}
        self.kernel.load_state(state.get("kernel_state"))  # last of the checks: a refused load changes nothing
        self.labels, self.C, self.dev_scores = labels, C, dev_scores
        self.model = OneVsRest(np.arange(len(support)), coef, intercept)
        self.support_items = support
        self._support_prepared = None
        return self

    def to_disk(self, path: Path) -> None:
        """Into an existing directory (the caller writes atomically)."""
        srsly.write_msgpack(Path(path) / "classifier.msgpack", self.state())
        for name, array in self.arrays().items():
            np.save(Path(path) / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)

    def from_disk(self, path: Path) -> "KernelClassifier":
        path = Path(path)
        arrays = {}
        for name in ARRAYS:
            try:
                arrays[name] = np.load(path / f"{name}.npy", allow_pickle=False)
            except (OSError, ValueError) as e:
                raise SavedModelError(f"cannot read {path / (name + '.npy')}: {e}") from e
        return self.load_state(srsly.read_msgpack(path / "classifier.msgpack"), arrays)

    def to_bytes(self) -> bytes:
        arrays = {name: _npy_bytes(a) for name, a in self.arrays().items()}
        return srsly.msgpack_dumps({"state": self.state(), "arrays": arrays,
                                    "sha256": {k: hashlib.sha256(v).hexdigest() for k, v in arrays.items()}})

    def from_bytes(self, data: bytes) -> "KernelClassifier":
        msg = srsly.msgpack_loads(data)
        arrays = {}
        for name in ARRAYS:
            raw = msg["arrays"][name]
            if hashlib.sha256(raw).hexdigest() != msg["sha256"][name]:
                raise SavedModelError(f"the saved {name} array does not match its checksum: the data is damaged "
                                      "or was changed after saving")
            arrays[name] = np.load(io.BytesIO(raw), allow_pickle=False)
        return self.load_state(msg["state"], arrays)


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()
