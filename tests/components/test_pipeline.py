"""components.pipeline: a pipeline of the package's components saved and
loaded as a whole. A save killed (SIGKILL) at any point leaves the old or
the new pipeline, complete, loadable and identical to one of them; loads
during saves get one or the other, never a mix; a file of spaCy's own parts
changed since saving is refused; settings given at load reach the
components (search and decoding ones with a warning; those the trained
model depends on refused); and a component trained on another parser or
tagset than the pipeline gives it is refused."""
import gc
import hashlib
import io
import json
import os
import random
import select
import shutil
import signal
import sys
import time
import types
from pathlib import Path

import pytest
import spacy
from spacy import util
from spacy.tokens import Doc
from spacy.training import Example

from spacy_structpref.components.pipeline import PIPELINE, SAVE_ID, guard_pipeline
from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import SavedModelError, StructPrefError
from spacy_structpref.saving import MARKER, check_saved
from spacy_structpref.trees import tree_to_doc

from tests.helpers.fixtures import slow_fixture

TEXTS = ["Prices fell sharply in New York .", "The company said profits rose ."]
# a DISTRO tagger with a small feature table: saves stay small and fast
TAGGER = {"model": {"@architectures": "spacy_structpref.DistroTagger.v1", "rank": None, "onehot": False,
                    "tok2vec": {"@architectures": "spacy_structpref.SparseFeatures.v1", "width": None,
                                "n_rows": 1024}}}
LOOKUPS = "structpref_test"


def build(trees, name: str, k: int):
    """Every component of the package but the DISTRO textcat, trained on
    ``trees``; the tokenizer, the vocab's lookups, the config and the meta
    also differ with ``name``, so that every part of a save tells which
    pipeline it belongs to."""
    nlp = spacy.blank("en")
    nlp.meta["name"] = name
    nlp.tokenizer.add_special_case("gonna", [{"ORTH": "gon"}, {"ORTH": "na"}] if name == "b" else [{"ORTH": "gonna"}])
    nlp.vocab.lookups.add_table(LOOKUPS, {"name": name})
    nlp.add_pipe("distro_tagger", config=TAGGER)
    nlp.add_pipe("forest_parser", config={"k": k, "store_forest": False})
    nlp.add_pipe("parse_reranker", config={"k": 3, "n_folds": 2, "n_jobs": 1})
    nlp.add_pipe("attachment_predictor")
    nlp.add_pipe("kernel_textcat", config={"C_grid": [1.0], "dev_every": 4, "n_threads": 1})
    examples = []
    for i, tree in enumerate(trees):
        reference = tree_to_doc(nlp.vocab, tree)
        reference.cats = {"even": float(i % 2 == 0), "odd": float(i % 2 == 1)}
        examples.append(Example(Doc(nlp.vocab, words=tree.leaves()), reference))
    nlp.initialize(lambda: examples)
    return nlp


def fingerprint(nlp) -> dict:
    """What a pipeline does and holds, part by part."""
    docs = [nlp(text) for text in TEXTS]
    return {"config": nlp.config.to_str(), "name": nlp.meta["name"],
            "tokens": [t.text for t in nlp.make_doc("we are gonna win")],
            "lookups": dict(nlp.vocab.lookups.get_table(LOOKUPS)),
            "docs": [(str(doc._.parse), [t.tag_ for t in doc], doc._.nbest, doc._.rerank["index"],
                      [round(s, 9) for s in doc._.rerank["scores"]], {c: round(p, 9) for c, p in doc.cats.items()})
                     for doc in docs]}


def digests(path: Path) -> dict:
    """The SHA-256 of every file of a saved pipeline but the two that name the save."""
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file() and p.relative_to(path).as_posix() not in
            ("meta.json", MARKER)}


@slow_fixture
def pipelines(tmp_path_factory):
    """Two pipelines trained on different short PTB-sample trees, each saved
    once as a reference: name -> (nlp, directory, fingerprint, digests)."""
    trees = [t for t in ptb_trees("train") if len(t.leaves()) <= 10]
    root = tmp_path_factory.mktemp("pipelines")
    out = {}
    for name, part, k in (("a", trees[:16], 4), ("b", trees[16:32], 5)):
        nlp = build(part, name, k)
        nlp.to_disk(root / name)
        out[name] = (nlp, root / name, fingerprint(spacy.load(root / name)), digests(root / name))
    return out


def which(pipelines, path: Path) -> str:
    """The pipeline ``path`` holds, by its files and by what it loads to (an assertion error for neither)."""
    files = digests(path)
    names = [name for name, (_, _, _, reference) in pipelines.items() if files == reference]
    assert len(names) == 1, f"{path} holds the files of neither pipeline"
    assert fingerprint(spacy.load(path)) == pipelines[names[0]][2], f"{path} does not load as {names[0]}"
    return names[0]


def test_the_two_pipelines_differ_in_every_part(pipelines):
    (_, _, a, files_a), (_, _, b, files_b) = pipelines["a"], pipelines["b"]
    assert all(a[key] != b[key] for key in a)
    for part in ("tokenizer", "vocab/lookups.bin", "config.cfg", "distro_tagger/cfg", "forest_parser/grammar.msgpack",
                 "parse_reranker/trained_on.json", "attachment_predictor/inventory.json",
                 "kernel_textcat/model/classifier.msgpack"):
        assert files_a.get(part) != files_b.get(part), part


def test_a_save_is_complete_marked_and_repeatable(pipelines, tmp_path):
    nlp, reference, _, files = pipelines["a"]
    nlp.to_disk(tmp_path / "again")
    assert digests(tmp_path / "again") == files  # saving twice writes the same files
    assert check_saved(tmp_path / "again", PIPELINE)
    marker = json.loads((tmp_path / "again" / MARKER).read_text())
    assert set(marker["files"]) == set(files) | {"meta.json"}
    ids = [json.loads((path / "meta.json").read_text())[SAVE_ID] for path in (reference, tmp_path / "again")]
    assert ids[0] != ids[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again"]  # no temporary directory left


# -- killed saves -------------------------------------------------------------------------------
SPACY_LANGUAGE = os.path.join("spacy", "language.py")
AFTER = "marker and swap"  # what follows spaCy's writing: the checksums, the marker, the exchange


# the C functions by which a save reads and changes the file system: the directory changes only
# at these, so killing a save just before one of them reaches every state it can leave behind
FILE_CALLS = {"open", "write", "flush", "close", "replace", "rename", "mkdir", "unlink", "rmdir", "link", "symlink",
              "sendfile", "copyfile", "fsync", "truncate", "chmod", "utime"}


def _on_files(function) -> bool:
    """Whether a C function of :data:`FILE_CALLS` is one on files: of a module
    (``os``, ``io``, ``builtins``) or a file's method, not a string's or a buffer's."""
    owner = getattr(function, "__self__", None)
    return isinstance(owner, types.ModuleType) or (isinstance(owner, io.IOBase)
                                                   and not isinstance(owner, (io.StringIO, io.BytesIO)))


class Profiler:
    """A ``sys.setprofile`` function that follows which part of the pipeline
    spaCy's ``Language.to_disk`` is writing (the path its serializer for the
    part was called with; ``before`` and ``AFTER`` outside them) and counts
    each part's calls of :data:`FILE_CALLS` (``lengths``). Just before the
    ``kill = (part, n)``-th it writes the part to the file descriptor
    ``report`` and SIGKILLs its process."""

    def __init__(self, kill=None, report=None):
        self.kill, self.report = kill, report
        self.writing = []  # (frame, part) of spaCy's serializers being run
        self.seen_spacy = False
        self.lengths = {}

    def __call__(self, frame, event, arg) -> None:
        code = frame.f_code
        if event == "call" and code.co_name == "<lambda>" and code.co_filename.endswith(SPACY_LANGUAGE) \
                and "p" in frame.f_locals:
            self.writing.append((frame, Path(frame.f_locals["p"]).name))
            self.seen_spacy = True
        elif event == "return" and self.writing and frame is self.writing[-1][0]:
            self.writing.pop()
        elif event == "c_call" and getattr(arg, "__name__", None) in FILE_CALLS and _on_files(arg):
            stage = self.writing[-1][1] if self.writing else AFTER if self.seen_spacy else "before"
            self.lengths[stage] = n = self.lengths.get(stage, 0) + 1
            if self.kill == (stage, n):
                os.write(self.report, stage.encode())
                os.kill(os.getpid(), signal.SIGKILL)


def _in_child(run, timeout: float = 300.0) -> tuple:
    """Run ``run(write_fd)`` in a forked child; (its wait status, what it wrote)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read)
            run(write)
        except BaseException:  # noqa: B902 (reported through the exit code)
            code = 1
        os._exit(code)
    os.close(write)
    chunks, deadline = [], time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([read], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("a save in a child process did not finish")
        chunk = os.read(read, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    return os.waitpid(pid, 0)[1], b"".join(chunks).decode()


def _lengths(nlp, target: Path) -> dict:
    """The events of each part of a save of ``nlp`` to ``target``, from a complete save in a child."""
    def run(out) -> None:
        profiler = Profiler()
        gc.disable()  # collections at other points would run other code: the counts must repeat
        sys.setprofile(profiler)
        nlp.to_disk(target)
        sys.setprofile(None)
        os.write(out, json.dumps(profiler.lengths).encode())

    status, text = _in_child(run)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return json.loads(text)


PARTS = {"before", "tokenizer", "meta.json", "config.cfg", "vocab", "distro_tagger", "forest_parser", "parse_reranker",
         "attachment_predictor", "kernel_textcat", AFTER}


def test_a_killed_save_leaves_the_old_or_the_new_pipeline(pipelines, tmp_path):
    """SIGKILL at events drawn in every part of the save (spaCy's tokenizer,
    meta, config and vocab, each component, and the marker and swap after
    them), three in each, saving each pipeline over the other: 66 kills."""
    target = tmp_path / "pipeline"
    rng = random.Random(0)
    plans = {}
    for there, new in (("a", "b"), ("b", "a")):
        shutil.copytree(pipelines[there][1], target)
        lengths = _lengths(pipelines[new][0], target)
        assert which(pipelines, target) == new  # the complete save
        shutil.rmtree(target)
        assert set(lengths) == PARTS
        plans[new] = [(part, rng.randint(1, lengths[part])) for part in sorted(PARTS) for _ in range(3)]
        rng.shuffle(plans[new])
    shutil.copytree(pipelines["a"][1], target)
    there, outcomes, hit = "a", {"old": 0, "new": 0}, {}
    while plans["a"] or plans["b"]:
        new = "b" if there == "a" else "a"
        nlp = pipelines[new][0]
        if not plans[new]:
            nlp.to_disk(target)
            there = new
            continue
        kill = plans[new].pop()

        def run(report, nlp=nlp, kill=kill) -> None:
            gc.disable()
            profiler = Profiler(kill, report)
            sys.setprofile(profiler)
            nlp.to_disk(target)
            sys.setprofile(None)
            os.write(report, json.dumps(profiler.lengths).encode())

        status, part = _in_child(run)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL and part == kill[0], \
            f"the save was not killed at {kill}: {part}"
        hit[part] = hit.get(part, 0) + 1
        now = which(pipelines, target)  # complete, loadable, one of the two
        outcomes["new" if now == new else "old"] += 1
        there = now
    print(f"kills: {outcomes}, by part: {hit}")
    assert sum(outcomes.values()) == 66 and set(hit) == PARTS
    assert outcomes["old"] and outcomes["new"]  # kills landed before and after the swap
    pipelines["a"][0].to_disk(target)  # the next save clears what the killed ones left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipeline"]
    assert which(pipelines, target) == "a"


def test_loads_during_saves_get_one_pipeline_or_the_other(pipelines, tmp_path, monkeypatch):
    """Two processes save the two pipelines in turn over one directory
    while this one loads it: every load is one of them. Counts the loads
    that found a save swapped in between spaCy's first reads and the lock
    and built the pipeline again."""
    target, stop = tmp_path / "pipeline", tmp_path / "stop"
    pipelines["a"][0].to_disk(target)
    writers = []
    for first in ("a", "b"):
        pid = os.fork()
        if pid == 0:
            try:
                order = [first, "b" if first == "a" else "a"]
                i = 0
                while not stop.exists():
                    pipelines[order[i % 2]][0].to_disk(target)
                    time.sleep(0.01 * (i % 3))  # leave the loads a way in, at varying points
                    i += 1
            finally:
                os._exit(0)
        writers.append(pid)
    built = []
    load_from_path = util.load_model_from_path
    monkeypatch.setattr(util, "load_model_from_path", lambda *a, **kw: built.append(1) or load_from_path(*a, **kw))
    seen = {"a": 0, "b": 0}
    try:
        # 12 loads at least, until both pipelines were seen (on a busy machine one
        # writer may hold the directory through several loads)
        for n in range(200):
            if n >= 12 and seen["a"] and seen["b"]:
                break
            loaded = spacy.load(target)
            got = [name for name, (_, _, reference, _) in pipelines.items() if fingerprint(loaded) == reference]
            assert len(got) == 1, "a load mixed the two pipelines"
            seen[got[0]] += 1
    finally:
        stop.touch()
        statuses = [os.waitpid(pid, 0)[1] for pid in writers]
    assert all(os.WIFEXITED(s) and os.WEXITSTATUS(s) == 0 for s in statuses)
    assert seen["a"] and seen["b"]
    print(f"loads: {seen}, built again after a swap: {len(built) - sum(seen.values())}")


def test_a_load_that_a_save_overtakes_builds_the_new_pipeline(pipelines, tmp_path):
    """spacy.load reads meta.json and config.cfg, builds the pipeline, then
    calls from_disk: a save swapped in between is noticed and the pipeline
    built again from the new save."""
    target = tmp_path / "pipeline"
    pipelines["a"][0].to_disk(target)
    config = util.load_config(target / "config.cfg")
    nlp = util.load_model_from_config(config, meta=util.get_model_meta(target))  # as spacy.load does
    pipelines["b"][0].to_disk(target)
    loaded = nlp.from_disk(target)
    assert loaded is not nlp and fingerprint(loaded) == pipelines["b"][2]


def test_a_changed_spacy_part_is_refused(pipelines, tmp_path):
    target = Path(shutil.copytree(pipelines["a"][1], tmp_path / "pipeline"))
    with (target / "config.cfg").open("a") as f:
        f.write("\n# edited\n")
    with pytest.raises(SavedModelError, match=r"config.cfg does not match the checksum.*delete .* unchecked"):
        spacy.load(target)
    (target / MARKER).unlink()  # what the error says to do for an edit on purpose
    assert fingerprint(spacy.load(target)) == pipelines["a"][2]


# -- settings given at load -----------------------------------------------------------------------
def _load_warned(path, config):
    with pytest.warns(UserWarning) as warned:
        nlp = spacy.load(path, config={"components": config})
    return nlp, " ".join(str(w.message) for w in warned)


def test_parser_settings_given_at_load_win_with_a_warning(pipelines):
    nlp, warned = _load_warned(pipelines["a"][1], {
        "forest_parser": {"k": 3, "max_length": None, "spans_key": "mine", "set_tags": False}})
    parser = nlp.get_pipe("forest_parser")
    assert {key: parser.cfg[key] for key in ("k", "max_length", "spans_key", "set_tags")} == {
        "k": 3, "max_length": None, "spans_key": "mine", "set_tags": False}
    for setting in ("k = 3", "max_length = None", "spans_key = 'mine'", "set_tags = False"):
        assert f"forest_parser: {setting} given at load replaces the saved" in warned
    assert parser.parser.max_length is None
    with nlp.select_pipes(enable=["distro_tagger", "forest_parser"]):
        doc = nlp(TEXTS[0])
        tags = [t.tag_ for t in doc]
        with nlp.select_pipes(enable=["distro_tagger"]):
            assert tags == [t.tag_ for t in nlp(TEXTS[0])]  # set_tags = false: the tagger's tags stay
    assert len(doc.spans["mine"]) and len(doc._.nbest) <= 3


def test_search_settings_of_every_component_given_at_load_win(pipelines):
    nlp, warned = _load_warned(pipelines["a"][1], {
        "attachment_predictor": {"beam_width": 2}, "parse_reranker": {"k": 2, "min_gap": 0.1},
        "kernel_textcat": {"n_threads": 2}, "distro_tagger": {"overwrite": True}})
    assert nlp.get_pipe("attachment_predictor").cfg["beam_width"] == 2
    assert {k: nlp.get_pipe("parse_reranker").cfg[k] for k in ("k", "min_gap")} == {"k": 2, "min_gap": 0.1}
    assert nlp.get_pipe("kernel_textcat").classifier.n_threads == 2
    assert nlp.get_pipe("distro_tagger").cfg["overwrite"] is True
    for setting in ("attachment_predictor: beam_width = 2", "parse_reranker: k = 2", "parse_reranker: min_gap = 0.1",
                    "kernel_textcat: n_threads = 2", "distro_tagger: overwrite = True"):
        assert setting in warned
    assert all(len(doc._.rerank["scores"]) <= 2 for doc in nlp.pipe(TEXTS))


def test_a_setting_given_at_load_as_saved_is_silent(pipelines, recwarn):
    nlp = spacy.load(pipelines["a"][1], config={"components": {"forest_parser": {"k": 4}}})
    assert nlp.get_pipe("forest_parser").cfg["k"] == 4
    assert not [w for w in recwarn if "given at load" in str(w.message)]


@pytest.mark.parametrize("component, setting, value", [
    ("attachment_predictor", "specialise", False), ("attachment_predictor", "reduced", False),
    ("kernel_textcat", "dev_every", 3), ("distro_tagger", "cost", 2.0), ("distro_tagger", "tag_dict_min_count", 2)])
def test_a_setting_the_model_depends_on_given_at_load_is_refused(pipelines, component, setting, value):
    with pytest.raises(SavedModelError, match=rf"{component}: {setting} = {value!r} \(saved: .*\) given at load: "
                                              "the trained model depends on this setting"):
        spacy.load(pipelines["a"][1], config={"components": {component: {setting: value}}})


def test_a_smaller_parser_k_given_at_load_is_refused_beside_the_reranker(pipelines):
    with pytest.raises(StructPrefError, match="forest_parser keeps 2-best lists, but parse_reranker reranks 3"):
        with pytest.warns(UserWarning, match="forest_parser: k = 2 given at load replaces the saved 4"):
            spacy.load(pipelines["a"][1], config={"components": {"forest_parser": {"k": 2}}})


# -- what a component was trained on ------------------------------------------------------------
def _mixed(pipelines, upstream: str, downstream: str):
    """A pipeline of ``upstream`` from pipeline b and ``downstream`` from
    pipeline a, copied in (so no factory guards it: guard_pipeline does)."""
    b, a = spacy.load(pipelines["b"][1]), spacy.load(pipelines["a"][1])
    nlp = spacy.blank("en")
    for name, source in ((upstream, b), (downstream, a)):
        nlp.add_pipe(name, source=source)
    guard_pipeline(nlp)
    return nlp


@pytest.mark.parametrize("upstream, downstream, what", [
    ("forest_parser", "parse_reranker", "forest_parser"), ("forest_parser", "kernel_textcat", "forest_parser"),
    ("distro_tagger", "attachment_predictor", "tagset")])
def test_a_component_trained_on_another_input_is_refused(pipelines, tmp_path, upstream, downstream, what):
    nlp = _mixed(pipelines, upstream, downstream)
    refused = rf"{downstream} was trained on another {what} than this pipeline's"
    with pytest.raises(StructPrefError, match=refused):
        nlp.to_disk(tmp_path / "mixed")
    assert not (tmp_path / "mixed").exists()
    # the same mix put together on disk: the pipeline's checksums refuse it, and once they are
    # made to fit, the component does
    target = Path(shutil.copytree(pipelines["a"][1], tmp_path / "crafted"))
    shutil.rmtree(target / upstream)
    shutil.copytree(pipelines["b"][1] / upstream, target / upstream)
    with pytest.raises(SavedModelError, match=f"{upstream}/.* does not match the checksum"):
        spacy.load(target)
    marker = json.loads((target / MARKER).read_text())
    marker["files"] = {name: hashlib.sha256((target / name).read_bytes()).hexdigest() for name in marker["files"]}
    (target / MARKER).write_text(json.dumps(marker))
    with pytest.raises(StructPrefError, match=f"was trained on another {what} than this pipeline's"):
        spacy.load(target)


def test_the_trained_on_identities_survive_saving(pipelines):
    nlp = spacy.load(pipelines["a"][1])
    trained = pipelines["a"][0]
    parser_identity = trained.get_pipe("forest_parser").identity()
    assert nlp.get_pipe("forest_parser").identity() == parser_identity
    assert nlp.get_pipe("parse_reranker").trained_on == {"forest_parser": parser_identity}
    assert nlp.get_pipe("kernel_textcat").trained_on == {"forest_parser": parser_identity}
    assert nlp.get_pipe("attachment_predictor").trained_on == {"tagset": sorted(nlp.get_pipe("distro_tagger").labels)}
