"""Scale-out on dask.distributed: every job on a LocalCluster of 2 worker
processes gives what the single-process path gives (exactly; kernels to
1e-12), a worker killed in the middle of a job loses and duplicates no
shard, and without dask the core imports and the jobs say what to install."""
import builtins
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from typer.testing import CliRunner

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref import distributed as dist
from spacy_structpref.cli import app
from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.incremental import CandidateSets, CPInventory, preference_sets, preference_sets_of
from spacy_structpref.kernels import gram
from spacy_structpref.learners.kernels import TreeKernel
from spacy_structpref.learners.perceptron import KernelPerceptron
from spacy_structpref.learners.specialised import SpecialisedLearner
from spacy_structpref.learners.training import fit
from spacy_structpref.reranking import jackknife_lists, parse_lists, parser_from_trees
from spacy_structpref.trees import to_bracketed, tree_to_doc

from tests.helpers.fixtures import slow_fixture

pytest.importorskip("distributed")
K = 5


def short(split, n, max_words=15):
    return [t for t in ptb_trees(split) if len(t.leaves()) <= max_words][:n]


@pytest.fixture(scope="module")
def client():
    """2 single-threaded worker processes, as the package starts them."""
    with dist.local_cluster(2) as c:
        yield c


@pytest.fixture(scope="session")
def train():
    return short("train", 45)


@pytest.fixture(scope="module")
def test_trees():
    return short("test", 24)


@slow_fixture
def parser_nlp(train):
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", config={"k": K})
    nlp.initialize(lambda: [Example(d, d) for d in (tree_to_doc(nlp.vocab, t) for t in train)])
    return nlp


def doc_content(doc):
    """Everything a parsed Doc carries: tokens, tags, constituents, user data (k-best list, forest, flags)."""
    spans = {key: [(s.start, s.end, s.label_) for s in group] for key, group in doc.spans.items()}
    return [t.text for t in doc], [t.whitespace_ for t in doc], [t.tag_ for t in doc], spans, doc.user_data


def one_process_docs(nlp, sentences):
    """nlp.pipe in this process, through a DocBin as the shards go."""
    docs = nlp.pipe(Doc(nlp.vocab, words=w, spaces=s) for w, s in sentences)
    return list(DocBin(docs=docs, store_user_data=True).get_docs(nlp.vocab))


def corpus_files(tmp_path, nlp, trees):
    """Half the trees as a .spacy file, half as a bracket file."""
    half = len(trees) // 2
    spacy_path, bracket_path = tmp_path / "part1.spacy", tmp_path / "part2.txt"
    DocBin(docs=[tree_to_doc(nlp.vocab, t) for t in trees[:half]]).to_disk(spacy_path)
    bracket_path.write_text("".join(to_bracketed(t) + "\n" for t in trees[half:]), encoding="utf8")
    return [spacy_path, bracket_path]


# ---------------------------------------------------------------- parsing
def test_parse_corpus_equals_nlp_pipe(client, parser_nlp, test_trees, tmp_path):
    inputs = corpus_files(tmp_path, parser_nlp, test_trees[:12])
    paths = dist.parse_corpus(parser_nlp, inputs, tmp_path / "out", shard_size=5, client=client, progress=False)
    assert [p.name for p in paths] == ["shard-00000.spacy", "shard-00001.spacy", "shard-00002.spacy"]
    sentences = dist.read_sentences(inputs)
    assert [w for w, _ in sentences] == [t.leaves() for t in test_trees[:12]]
    got = list(dist.read_parsed(tmp_path / "out", parser_nlp.vocab))
    want = one_process_docs(parser_nlp, sentences)
    assert [doc_content(d) for d in got] == [doc_content(d) for d in want]
    assert all(d._.nbest and d._.forest for d in got)


@slow_fixture
def jackknifed(train):
    """The single-process jackknife: 3 folds, in this process."""
    return [it.to_dict() for it in jackknife_lists(train, n_folds=3, k=K, with_forest=True, n_jobs=1,
                                                   progress=False)]


def test_jackknife_and_parse_lists_equal_single_process(client, train, test_trees, jackknifed):
    sharded = dist.jackknife_lists(train, n_folds=3, k=K, with_forest=True, shard_size=4, client=client,
                                   progress=False)
    assert [it.to_dict() for it in sharded] == jackknifed
    assert len({id(it.forest.symbols) for it in sharded if it.forest is not None}) == 1  # one table
    parser = parser_from_trees(train)
    single = parse_lists(test_trees[:10], parser, k=K, with_forest=True)
    sharded = dist.parse_lists(test_trees[:10], parser, k=K, with_forest=True, shard_size=3, client=client,
                               progress=False)
    assert [it.to_dict() for it in sharded] == [it.to_dict() for it in single]


# ---------------------------------------------------- attachment sets
@pytest.fixture(scope="module")
def inventory(train):
    return CPInventory.from_trees(ptb_trees("train")[:120])


def test_candidate_sets_and_utilities_equal_single_process(client, train, test_trees, inventory):
    psets = dist.candidate_sets(test_trees, inventory, shard_size=5, client=client, progress=False)
    assert psets == [s for t in test_trees for s in preference_sets(t, inventory)]
    train_sets = preference_sets_of(train[:12], inventory)
    vp = KernelPerceptron(TreeKernel(lam=0.5))
    fit(vp, CandidateSets(train_sets, vp.kernel.symbols, reduced=True), [s.gold for s in train_sets])
    want = [vp.utilities(s.dag(vp.kernel.symbols, True)) for s in psets]
    got = dist.set_utilities(vp, psets, reduced=True, shard_size=40, client=client, progress=False)
    assert len(got) == len(want) and all(np.allclose(g, w, rtol=1e-12, atol=1e-12) for g, w in zip(got, want))
    # one learner per foot class, the support of each sent once
    spec = SpecialisedLearner(KernelPerceptron(TreeKernel(lam=0.5)))
    symbols = spec.prototype.kernel.symbols
    keys = [s.foot[:1] for s in train_sets]
    fit(spec, CandidateSets(train_sets, symbols, reduced=True), [s.gold for s in train_sets], keys)
    test_keys = [s.foot[:1] for s in psets]
    want = [spec.utilities(s.dag(symbols, True), k) for s, k in zip(psets, test_keys)]
    got = dist.set_utilities(spec, psets, reduced=True, keys=test_keys, shard_size=40, client=client,
                             progress=False)
    assert all(np.allclose(g, w, rtol=1e-12, atol=1e-12) for g, w in zip(got, want))


# ------------------------------------------------------------------ kernels
def test_gram_blocks_equal_single_process(client, train, test_trees):
    trees = [to_bracketed(t) for t in train + test_trees]
    want = gram(trees, lam=0.4, normalize=True)
    got = dist.gram(trees, lam=0.4, block_size=16, client=client, progress=False)
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-12
    want = gram(train[:30], test_trees, lam=0.3, sigma=0, normalize=False)
    got = dist.gram(train[:30], test_trees, lam=0.3, sigma=0, normalize=False, block_size=7, client=client,
                    progress=False)
    assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()


def test_small_inputs_run_in_this_process(train):
    # no cluster is started: too small to pay for worker processes
    assert np.abs(dist.gram(train[:20]) - gram(train[:20])).max() <= 1e-12
    with dist.runner(in_process=True) as run:
        assert isinstance(run, dist.cluster.LocalRunner)


# ------------------------------------------------------------ lost workers
def kill_one_worker_when(client, ready, record):
    """In a thread: once ``ready()``, SIGKILL one worker process (its nanny
    starts a new one); ``record`` gets what ``ready`` saw then."""
    def run():
        deadline = time.time() + 60
        while time.time() < deadline:
            seen = ready()
            if seen is not None:
                pid = sorted(client.run(os.getpid).values())[0]
                record["seen"], record["pid"] = seen, pid
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_killed_worker_loses_and_duplicates_no_shard(client, parser_nlp, test_trees, tmp_path, monkeypatch):
    out = tmp_path / "out"
    inputs = corpus_files(tmp_path, parser_nlp, test_trees[:14])
    n = 14
    writes = []
    real_atomic_file = dist.jobs.atomic_file

    def counted(path):
        writes.append(Path(path).name)
        return real_atomic_file(path)

    monkeypatch.setattr(dist.jobs, "atomic_file", counted)

    def first_shard_written():
        done = list(out.glob("shard-*.spacy")) if out.is_dir() else []
        return len(done) if done else None

    record = {}
    thread = kill_one_worker_when(client, first_shard_written, record)
    paths = dist.parse_corpus(parser_nlp, inputs, out, shard_size=1, client=client, progress=False)
    thread.join()
    assert record and record["seen"] < n  # killed in the middle of the job
    assert record["pid"] not in client.run(os.getpid).values()  # that worker is gone
    assert len(paths) == n and sorted(p.name for p in out.iterdir()) == sorted(
        [p.name for p in paths] + ["shards.json"])  # no partial files, no extra shard
    assert sorted(writes) == sorted([p.name for p in paths] + ["shards.json"])  # each shard written once
    got = list(dist.read_parsed(out, parser_nlp.vocab))
    want = one_process_docs(parser_nlp, dist.read_sentences(inputs))
    assert [doc_content(d) for d in got] == [doc_content(d) for d in want]


def test_killed_worker_mid_jackknife_recomputes_its_fold(client, train, jackknifed):
    """The fold grammars live on the workers: a lost one is rebuilt."""
    def scheduler_done():
        def count(dask_scheduler):
            return sum(ts.state == "memory" and "parse_items" in str(ts.key) for ts in dask_scheduler.tasks.values())

        done = client.run_on_scheduler(count)
        return done if done >= 1 else None

    record = {}
    thread = kill_one_worker_when(client, scheduler_done, record)
    sharded = dist.jackknife_lists(train, n_folds=3, k=K, with_forest=True, shard_size=1, client=client,
                                   progress=False)
    thread.join()
    assert record and record["seen"] < len(train)
    assert [it.to_dict() for it in sharded] == jackknifed


# ------------------------------------------------------------ without dask
@pytest.fixture
def no_dask(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name.split(".")[0] in ("dask", "distributed"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, globals, locals, fromlist, level)

    for name in list(sys.modules):
        if name.split(".")[0] in ("dask", "distributed"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(builtins, "__import__", fake_import)


def test_without_dask_a_cluster_job_says_what_to_install(no_dask, train, tmp_path):
    with pytest.raises(dist.MissingDependency, match=r'pip install "spacy-structpref\[distributed\]"'):
        dist.gram(train[:20], n_workers=2)
    with pytest.raises(dist.MissingDependency, match="dask"):
        dist.candidate_sets(train[:5], CPInventory.from_trees(train), scheduler="tcp://127.0.0.1:8786")
    assert dist.gram(train[:20], n_workers=0).shape == (20, 20)  # the in-process path needs no dask
    trees = tmp_path / "trees.txt"
    trees.write_text("".join(to_bracketed(t) + "\n" for t in train[:20]), encoding="utf8")
    result = CliRunner().invoke(app, ["gram", str(trees), str(tmp_path / "K.npy"), "--n-workers", "2"])
    assert result.exit_code == 1 and "spacy-structpref[distributed]" in result.stderr
    assert "Traceback" not in result.output


def test_the_core_never_imports_dask():
    code = ("import sys, spacy_structpref, spacy_structpref.cli, spacy_structpref.distributed, spacy, "
            "spacy_structpref.reranking, spacy_structpref.incremental, spacy_structpref.kernels; "
            "spacy.blank('en').add_pipe('forest_parser'); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'dask', 'distributed'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -------------------------------------------------------------------- CLI
def test_cli_commands_on_a_running_scheduler(client, parser_nlp, train, test_trees, tmp_path):
    address = client.scheduler.address
    model = tmp_path / "model"
    parser_nlp.to_disk(model)
    inputs = corpus_files(tmp_path, parser_nlp, test_trees[:6])
    runner = CliRunner()
    result = runner.invoke(app, ["parse-corpus", str(model), str(tmp_path / "out"), *map(str, inputs),
                                 "--shard-size", "4", "--scheduler", address])
    assert result.exit_code == 0, result.output
    assert "wrote 2 shards" in result.stdout and len(list(dist.read_parsed(tmp_path / "out"))) == 6
    trees = tmp_path / "trees.txt"
    trees.write_text("".join(to_bracketed(t) + "\n" for t in train[:40]), encoding="utf8")
    result = runner.invoke(app, ["gram", str(trees), str(tmp_path / "K.npy"), "--block-size", "15",
                                 "--scheduler", address])
    assert result.exit_code == 0, result.output
    assert np.abs(np.load(tmp_path / "K.npy") - gram(train[:40])).max() <= 1e-12
    result = runner.invoke(app, ["gram", str(trees), str(tmp_path / "K.npy"), "--scheduler", "nowhere"])
    assert result.exit_code == 1 and "tcp://HOST:PORT" in result.stderr


@pytest.mark.parametrize("kwargs,message", [
    ({"shard_size": 0}, "shard_size"), ({"n_workers": -1}, "n_workers"),
])
def test_bad_settings_are_refused(train, kwargs, message):
    with pytest.raises(StructPrefError, match=message):
        dist.candidate_sets(train[:3], CPInventory.from_trees(train), progress=False, **kwargs)


def test_attachment_utilities_of_a_trained_predictor(client, tmp_path):
    """The component's own utilities and L_r, from the cluster and from the CLI."""
    from spacy_structpref.corpora import corpus_docs
    from spacy_structpref.learners.metrics import loss_at_r
    from spacy_structpref.trees import doc_to_tree

    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("attachment_predictor")
    examples = [Example(d, d) for d in corpus_docs("ptb", "train", nlp.vocab, limit=20)]
    nlp.initialize(lambda: examples)
    pipe.update(examples)
    docs = corpus_docs("ptb", "dev", nlp.vocab, limit=8)
    want_u, want_gold = pipe._gold_utilities(docs)
    trees = [doc_to_tree(d) for d in docs]
    got_u, got_gold = dist.attachment_utilities(nlp, trees, shard_size=3, client=client, progress=False)
    assert got_gold == want_gold and len(got_u) == len(want_u) > 20
    assert all(np.allclose(g, w, rtol=1e-12, atol=1e-12) for g, w in zip(got_u, want_u))
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=docs).to_disk(tmp_path / "dev.spacy")
    result = CliRunner().invoke(app, ["attachment-utilities", str(tmp_path / "model"), str(tmp_path / "dev.spacy"),
                                      "--r", "1,3", "-o", str(tmp_path / "u.json"), "--scheduler",
                                      client.scheduler.address])
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "u.json").read_text(encoding="utf8"))
    assert saved["gold"] == want_gold and saved["loss"] == {str(k): v for k, v in
                                                            loss_at_r(want_u, want_gold, (1, 3)).items()}
    assert all(np.array_equal(np.asarray(s, dtype=float), g) for s, g in zip(saved["utilities"], got_u))
    assert f"{100 * saved['loss']['1']:.2f} %" in result.stdout
