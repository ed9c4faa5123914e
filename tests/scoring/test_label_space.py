"""Whether label similarities follow the labels' families and variants,
checked on small matrices by hand."""
import numpy
import pytest

from spacy_structpref.corpora.labels import variant_bases
from spacy_structpref.scoring.label_space import family_closeness, variant_closeness

# five TREC-like labels in three families, and their cosines
FAMILY_LABELS = ["HUM:ind", "HUM:gr", "LOC:city", "LOC:other", "NUM:date"]
FAMILY_SIMS = numpy.array([[1.0, 0.8, 0.1, 0.0, 0.2],
                           [0.8, 1.0, 0.9, 0.1, 0.0],
                           [0.1, 0.9, 1.0, 0.5, 0.0],
                           [0.0, 0.1, 0.5, 1.0, 0.5],
                           [0.2, 0.0, 0.0, 0.5, 1.0]])


def test_variant_closeness_by_hand():
    labels = ["NN", "NN-TL", "VB", "VB-HL"]
    sims = numpy.array([[1.0, 0.9, 0.1, 0.0],
                        [0.9, 1.0, 0.2, 0.95],
                        [0.1, 0.2, 1.0, 0.3],
                        [0.0, 0.95, 0.3, 1.0]])
    c = variant_closeness(labels, sims, variant_bases(labels))
    # NN-TL: NN (0.9) behind VB-HL (0.95): rank 2; VB-HL: VB (0.3) behind NN-TL (0.95): rank 2
    assert c["variants"] == 2 and c["nearest"] == 0 and c["within_5"] == 2 and c["median_rank"] == 2
    assert c["cosine_to_base"] == pytest.approx((0.9 + 0.3) / 2)
    assert c["cosine_to_others"] == pytest.approx(((0.2 + 0.95) / 2 + (0.0 + 0.95) / 2) / 2)
    # orthogonal vectors: ties count against the base, which comes last
    c = variant_closeness(labels, numpy.eye(4), variant_bases(labels))
    assert c["nearest"] == 0 and c["median_rank"] == 3
    assert variant_closeness(["NN", "VB"], numpy.eye(2), {}) is None


def test_family_closeness_by_hand():
    labels, sims = FAMILY_LABELS, FAMILY_SIMS
    c = family_closeness(labels, sims)
    # nearest: HUM:ind -> HUM:gr (in); HUM:gr -> LOC:city (out); LOC:city -> HUM:gr (out);
    # LOC:other -> LOC:city and NUM:date tie at 0.5 (a tie counts against it); NUM:date -> LOC:other (out)
    assert c["labels"] == 5 and c["families"] == 3 and c["nearest_in_family"] == 1
    assert c["chance"] == pytest.approx(4 / 20)
    assert c["cosine_within"] == pytest.approx((0.8 + 0.5) / 2)
    # across: HUM x LOC (0.1, 0.0, 0.9, 0.1), HUM x NUM (0.2, 0.0), LOC x NUM (0.0, 0.5)
    assert c["cosine_across"] == pytest.approx((0.1 + 0.0 + 0.9 + 0.1 + 0.2 + 0.0 + 0.0 + 0.5) / 8)
    # no family, or no family of two: nothing to measure
    assert family_closeness(["NN", "VB", "JJ"], numpy.eye(3)) is None
    assert family_closeness(["A:x", "B:y", "C:z"], numpy.eye(3)) is None




def test_family_closeness_per_family_and_between_families():
    labels, sims = FAMILY_LABELS, FAMILY_SIMS
    c = family_closeness(labels, sims)
    assert c["within_by_family"] == pytest.approx({"HUM": 0.8, "LOC": 0.5})
    assert c["between"] == pytest.approx({("HUM", "LOC"): 0.275, ("HUM", "NUM"): 0.1, ("LOC", "NUM"): 0.25})
    # families given explicitly override the labels' own scheme
    other = family_closeness(labels, sims, ["A", "B", "A", "B", "A"])
    assert other["families"] == 2 and other["within_by_family"]["B"] == pytest.approx(0.1)


def test_family_closeness_of_ptb_tags():
    """PTB tags fall in their universal tags: NN and NNS in NOUN, VB and VBZ in VERB."""
    labels = ["NN", "NNS", "VB", "VBZ"]
    sims = numpy.array([[1.0, 0.6, 0.0, 0.1],
                        [0.6, 1.0, 0.1, 0.2],
                        [0.0, 0.1, 1.0, 0.4],
                        [0.1, 0.2, 0.4, 1.0]])
    c = family_closeness(labels, sims)
    assert c["within_by_family"] == pytest.approx({"NOUN": 0.6, "VERB": 0.4})
    assert c["between"][("NOUN", "VERB")] == pytest.approx(0.1) and c["nearest_in_family"] == 4
