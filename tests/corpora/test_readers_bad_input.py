"""Corpus reading never damages data silently: bad lines
and damaged zips are errors naming the file and line, or, with
``skip_bad=True``, sentences left out and counted."""
import shutil
import zipfile

import nltk
import pytest
from typer.testing import CliRunner

from spacy_structpref.cli import app
from spacy_structpref.corpora import (basque_sentences, brown_sentences, corpus_items, item_to_doc, ptb_trees,
                                      read_bracketed, read_conll, read_tagged)
from spacy_structpref.corpora.assets import local_copy
from spacy_structpref.errors import CorpusError, CorpusWarning

TOKEN = "{i}\t{w}\t{w}\tIZE\tIZE_ARR\t_\t0\tROOT\t_\t_"


def conll(*sentences):
    return "\n\n".join("\n".join(TOKEN.format(i=i + 1, w=w) for i, w in enumerate(s)) for s in sentences) + "\n\n"


GOOD = conll(["a", "b"], ["c"], ["d", "e", "f"])


def test_good_conll_reads():
    assert [len(s) for s in read_conll(GOOD, "x")] == [2, 1, 3]
    assert read_conll(GOOD, "x")[0] == (("a", "IZE_ARR"), ("b", "IZE_ARR"))


@pytest.mark.parametrize("damage,line,why", [
    (lambda t: t.replace("2\tb\tb\tIZE\tIZE_ARR\t_\t0\tROOT\t_\t_", "2\tb\tb"), 2, "3 tab-separated column"),
    (lambda t: t.replace("\tc\t", "\tc\0\t"), 4, "a NUL byte"),
    (lambda t: t.replace("\tc\tc\t", "\t\tc\t"), 4, "an empty word"),
    (lambda t: t.replace("\tc\tc\t", "\t \tc\t"), 4, "an empty word"),
    (lambda t: t.replace("2\tb\tb\tIZE\tIZE_ARR", "2\tb\tb\tIZE\t"), 2, "an empty tag"),
    # tabs turned into spaces: every one, or one (nine columns), or the columns shifted by one
    (lambda t: t.replace("2\tb\tb\tIZE\tIZE_ARR\t_\t0\tROOT\t_\t_", "2 b b IZE IZE_ARR _ 0 ROOT _ _"), 2,
     "1 tab-separated column"),
    (lambda t: t.replace("2\tb\tb\tIZE", "2 b\tb\tIZE"), 2, "9 tab-separated column"),
    (lambda t: t.replace("2\tb\tb\t", "x\tb\tb\t"), 2, "ID 'x' is not a token number"),
])
def test_bad_conll_line_is_an_error_with_file_and_line_or_a_counted_skip(damage, line, why):
    text = damage(GOOD)
    assert text != GOOD
    with pytest.raises(CorpusError, match=f"eus.train, line {line}: {why}.*skip_bad=True"):
        read_conll(text, "eus.train")
    read = read_conll(text, "eus.train", skip_bad=True)
    assert len(read) == 2 and len(read.skipped) == 1 and read.skipped[0].startswith(f"eus.train, line {line}")
    # the bad sentence goes whole: no sentence is split, none grows
    assert all(s in read_conll(GOOD, "x") for s in read)


def test_short_line_does_not_split_a_sentence():
    # NLTK-style reading ended the sentence at the short line: 3 sentences became 4
    text = GOOD.replace("2\tb\tb\tIZE\tIZE_ARR\t_\t0\tROOT\t_\t_", "2\tb")
    read = read_conll(text, "x", skip_bad=True)
    assert len(read) + len(read.skipped) == 3


def test_line_breaks_are_newlines_only():
    # U+0085 and U+2028 are line breaks to str.splitlines, but can stand in a word
    text = conll(["a\x85b", "c\u2028d"])
    assert read_conll(text, "x")[0] == (("a\x85b", "IZE_ARR"), ("c\u2028d", "IZE_ARR"))
    assert read_conll(text.replace("\n", "\r\n"), "x")[0][0] == ("a\x85b", "IZE_ARR")


@pytest.mark.parametrize("text,line,why", [
    ("(S (NP (DT a)) (VP (VB b)))\n(S (NP (DT c) (VP (VB d)))\n", 2, "1 unclosed"),
    ("(S (NP (DT a)) (VP (VB b)))\n\n(S (NP (DT c)) (VP (VB d))))\n", 3, "closes no bracket"),
    ("(S (NP (DT a)) (VP (VB b)))\nstray words\n(S (NP (DT c)) (VP (VB d)))\n", 2, "text outside any tree"),
    ("(S (NP (DT a)) (VP (VB b)))\n(S (NP (DT c))\n (VP (VB d\0)))\n", 3, "a NUL byte"),
    ("(S (NP (DT a)) (VP (VB b)))\n(S (NP c (DT c)) (VP (VB d)))\n", 2, "not the only child"),
    ("(S (NP (DT a)) (VP (VB b)))\n(S (NP (-NONE- *)))\n", 2, "no words left"),
])
def test_bad_tree_is_an_error_with_file_and_line_or_a_counted_skip(text, line, why):
    with pytest.raises(CorpusError, match=f"wsj_0001.mrg, line {line}: .*{why}"):
        read_bracketed(text, "wsj_0001.mrg")
    read = read_bracketed(text, "wsj_0001.mrg", skip_bad=True)
    assert len(read.skipped) == 1 and str(read[0]) == "(TOP (S (NP (DT a)) (VP (VB b))))"


def test_bad_tagged_token_is_an_error_or_a_counted_skip():
    text = "\n\n\tThe/at dog/nn ./.\n\n\tA/at cat\n\n\tIt/pps ran/vbd\n"
    with pytest.raises(CorpusError, match="ca01, line 5: token 'cat' is not word/tag"):
        read_tagged(text, "ca01")
    read = read_tagged(text, "ca01", skip_bad=True)
    assert read == [(("The", "AT"), ("dog", "NN"), (".", ".")), (("It", "PPS"), ("ran", "VBD"))]
    assert read.skipped == ["ca01, line 5: token 'cat' is not word/tag"]
    for bad in ("/nn", "dog/", "d\0g/nn"):
        with pytest.raises(CorpusError, match="ca01, line 1"):
            read_tagged(bad, "ca01")


def test_empty_word_in_a_sentence_item_is_a_corpus_error(nlp):
    with pytest.raises(CorpusError, match="token 1 .*non-empty"):
        item_to_doc(nlp.vocab, [("a", "X"), ("", "Y")])


# ------------------------------------------------- through NLTK data roots
@pytest.fixture
def nltk_root(tmp_path, monkeypatch):
    """An NLTK data root of our own, first in NLTK's search path."""
    (tmp_path / "corpora").mkdir()
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)] + list(nltk.data.path))
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    return tmp_path


def write_conll_zip(root, train: str, test: str = GOOD):
    with zipfile.ZipFile(root / "corpora" / "conll2007.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conll2007/", "")
        z.writestr("conll2007/eus.train", train.encode("iso-8859-2"))
        z.writestr("conll2007/eus.test", test.encode("iso-8859-2"))


def test_damaged_basque_corpus_names_file_and_line_or_skips_with_a_count(nltk_root):
    write_conll_zip(nltk_root, GOOD, GOOD.replace("\tc\tc\t", "\t\tc\t"))
    with pytest.raises(CorpusError, match="eus.test, line 4: an empty word"):
        basque_sentences("test")
    with pytest.warns(CorpusWarning, match="skipped 1 bad sentence"):
        read = basque_sentences("test", skip_bad=True)
    assert len(read) == 2 and len(read.skipped) == 1


@pytest.mark.parametrize("corpus,reader", [("conll2007", lambda: basque_sentences("test")),
                                           ("treebank", lambda: ptb_trees("test")),
                                           ("brown", lambda: brown_sentences(10))])
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_zip_is_a_corpus_error_naming_it(nltk_root, corpus, reader, damage):
    source = local_copy(corpus) if corpus != "conll2007" else None
    target = nltk_root / "corpora" / f"{corpus}.zip"
    if source is None:
        write_conll_zip(nltk_root, GOOD)
    else:
        shutil.copyfile(source, target)
    data = target.read_bytes()
    target.write_bytes(b"not a zip at all" * 100 if damage == "garbage" else data[:len(data) // 2])
    with pytest.raises(CorpusError, match=f"{corpus}.zip.*damaged"):
        reader()


def test_zip_with_a_corrupted_member_is_a_corpus_error(nltk_root):
    write_conll_zip(nltk_root, GOOD * 50, GOOD * 50)
    target = nltk_root / "corpora" / "conll2007.zip"
    with zipfile.ZipFile(target) as z:
        info = z.getinfo("conll2007/eus.test")
    data = bytearray(target.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 10, start + 40):
        data[i] ^= 0x5A
    target.write_bytes(bytes(data))
    with pytest.raises(CorpusError, match="conll2007.zip: eus.test cannot be read.*damaged"):
        basque_sentences("test")


def test_treebank_zip_without_mrg_files_is_a_corpus_error(nltk_root, tmp_path):
    """A treebank package with no .mrg member is damaged: an error, not empty corpora."""
    with zipfile.ZipFile(nltk_root / "corpora" / "treebank.zip", "w") as z:
        z.writestr("treebank/", "")
        z.writestr("treebank/combined/", "")
        z.writestr("treebank/combined/README", "no trees here")
    with pytest.raises(CorpusError, match=r"treebank.zip.*no file named like wsj_.*\\.mrg.*damaged"):
        ptb_trees("test")
    res = CliRunner().invoke(app, ["convert", "ptb", str(tmp_path / "out")])
    assert res.exit_code == 1 and "no file named like" in res.output
    assert not (tmp_path / "out" / "train.spacy").exists()


@pytest.mark.parametrize("limit", [-5, -1, 2.5, "3", True])
def test_a_negative_or_non_integer_limit_is_refused(limit):
    for read in (lambda: corpus_items("basque", "test", limit), lambda: brown_sentences(limit)):
        with pytest.raises(CorpusError, match="limit"):
            read()


def test_limit_zero_means_all_as_none_does(nltk_root, tmp_path):
    write_conll_zip(nltk_root, GOOD * 200, GOOD * 2)
    assert len(corpus_items("basque", "test", 0)) == len(corpus_items("basque", "test")) == 6
    assert len(corpus_items("basque", "test", 4)) == 4
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["convert", "basque", str(out), "--limit", "-5"])
    assert res.exit_code == 1 and res.output.count("\n") == 1 and "limit" in res.output
    assert not out.exists() or not any(out.iterdir())
    res = CliRunner().invoke(app, ["convert", "basque", str(out), "--limit", "0"])
    assert res.exit_code == 0, res.output


def test_convert_skip_bad_reports_the_count(nltk_root, tmp_path):
    write_conll_zip(nltk_root, GOOD * 200, GOOD.replace("\tc\tc\t", "\t\tc\t"))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["convert", "basque", str(out)])
    assert res.exit_code == 1 and "eus.test, line 4: an empty word" in res.output
    res = CliRunner().invoke(app, ["convert", "basque", str(out), "--skip-bad"])
    assert res.exit_code == 0, res.output
    assert "skipped eus.test, line 4" in res.output and (out / "test.spacy").exists()
