"""What the corpora's labels are made of: Brown's tag variants and the
families of question classes, PTB tags and Basque tags."""
from spacy_structpref.corpora.labels import UNIVERSAL_PTB, label_families, variant_bases, variant_parts


def test_variant_bases():
    labels = ["NN", "NN-TL", "FW-NN", "FW-NN-TL", "NN-TL-HL", "NN$", "NN$-TL", "VB-NC", "FW-", "-TL"]
    assert variant_bases(labels) == {"NN-TL": "NN", "FW-NN": "NN", "FW-NN-TL": "NN", "NN-TL-HL": "NN",
                                     "NN$-TL": "NN$"}


def test_variant_parts():
    assert variant_parts("FW-NN-TL") == ("NN", ("FW-", "-TL"))
    assert variant_parts("NN-TL-HL") == ("NN", ("-HL", "-TL"))
    assert variant_parts("NN$") == ("NN$", ())
    assert variant_parts("-TL") == ("-TL", ()) and variant_parts("FW-") == ("FW-", ())


def test_families_of_question_classes_and_generated_labels():
    assert label_families(["HUM:ind", "HUM:gr", "LOC:city"]) == ["HUM", "HUM", "LOC"]
    assert label_families(["F0:m0", "F0:m1", "F1:m0"]) == ["F0", "F0", "F1"]


def test_families_of_ptb_tags():
    """Petrov, Das & McDonald (2012)'s universal tags: the 45 PTB tags of
    the sample, by hand."""
    ptb = ["#", "$", "''", ",", "-LRB-", "-RRB-", ".", ":", "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR",
           "JJS", "LS", "MD", "NN", "NNP", "NNPS", "NNS", "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP",
           "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB", "``"]
    families = dict(zip(ptb, label_families(ptb)))
    assert {t for t, f in families.items() if f == "NOUN"} == {"NN", "NNS", "NNP", "NNPS"}
    assert {t for t, f in families.items() if f == "VERB"} == {"MD", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ"}
    assert {t for t, f in families.items() if f == "."} == {"#", "$", "''", ",", "-LRB-", "-RRB-", ".", ":", "``"}
    assert families["WRB"] == "ADV" and families["WDT"] == "DET" and families["WP$"] == "PRON"
    assert families["TO"] == families["RP"] == families["POS"] == "PRT"
    assert set(UNIVERSAL_PTB.values()) == {"NOUN", "VERB", "ADJ", "ADV", "PRON", "DET", "PRT", "ADP", "CONJ",
                                           "NUM", "X", "."}


def test_families_of_basque_tags():
    tags = ["IZE", "IZE_ARR", "IZE_IZB", "ADJ_ARR", "ADL", "PUNT_PUNT_KOMA", "SIG_-"]
    assert label_families(tags) == ["IZE", "IZE", "IZE", "ADJ", "ADL", "PUNT", "SIG"]


def test_no_scheme_no_families():
    # Brown's tags (variants, punctuation) follow none of the schemes
    assert label_families(["NN", "NN-TL", "AT", "--"]) is None
    assert label_families([]) is None
    # a tag set with one tag outside the PTB's is not read as PTB
    assert label_families(["NN", "NNS", "BEZ"]) is None
