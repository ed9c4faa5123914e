"""The factories refuse bad settings when the pipeline is built: any value
of a setting that bounds work or shapes training is accepted, or refused
with a StructPrefError or spaCy's ConfigValidationError (a wrong type its
config checks catch), never another exception and never a silent bad value.
The fuzz test draws any value for each setting."""
import math

import pytest
import spacy
from confection import ConfigValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.errors import StructPrefError

PCFG = "spacy_structpref.PCFG.v1"
NLP = spacy.blank("en")  # creates the components (spacy.blank per example is slow)
# (spaCy refuses NaN and infinity in any config itself, before a factory sees them)
ANY = st.one_of(st.none(), st.booleans(), st.integers(-3, 10 ** 7), st.floats(allow_nan=False, allow_infinity=False),
                st.text(max_size=2))

# (factory, config path of the setting, whether a value is acceptable)
SETTINGS = {
    "attachment_predictor beam_width": ("attachment_predictor", ("beam_width",),
                                        lambda v: type(v) is int and 1 <= v <= 100),
    "attachment_predictor max_length": ("attachment_predictor", ("max_length",),
                                        lambda v: v is None or type(v) is int and v >= 1),
    "forest_parser vertical_markov": ("forest_parser", ("model", "vertical_markov"),
                                      lambda v: type(v) is int and v >= 1),
    "forest_parser horizontal_markov": ("forest_parser", ("model", "horizontal_markov"),
                                        lambda v: type(v) is int and v >= -1),
    "forest_parser max_length": ("forest_parser", ("max_length",), lambda v: v is None or type(v) is int and v >= 1),
    "distro_tagger cost": ("distro_tagger", ("cost",),
                           lambda v: type(v) in (int, float) and math.isfinite(v) and v > 0),
    "distro_tagger rank": ("distro_tagger", ("model", "rank"), lambda v: v is None or type(v) is int and v >= 1),
}


def build(name, value):
    factory, path, _ = SETTINGS[name]
    config = {"model": {"@architectures": PCFG}} if path[0] == "model" and factory == "forest_parser" else {}
    if factory == "distro_tagger" and path[0] == "model":
        config = {"model": {"@architectures": "spacy_structpref.DistroTagger.v1",
                            "tok2vec": {"@architectures": "spacy_structpref.SparseFeatures.v1", "width": None}}}
    target = config
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return NLP.create_pipe(factory, config=config)


@pytest.mark.parametrize("name, value", [
    ("attachment_predictor beam_width", 10 ** 6), ("attachment_predictor max_length", 0),
    ("forest_parser vertical_markov", 0), ("forest_parser vertical_markov", -1), ("distro_tagger cost", 0),
    ("distro_tagger cost", -1.0), ("distro_tagger rank", 0),
])
def test_a_bad_setting_is_refused_when_the_pipeline_is_built(name, value):
    with pytest.raises((StructPrefError, ConfigValidationError)):
        build(name, value)


@pytest.mark.fuzz
@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(SETTINGS)), ANY)
def test_any_setting_value_is_accepted_or_refused_cleanly(name, value):
    acceptable = SETTINGS[name][2](value)
    try:
        build(name, value)
    except (StructPrefError, ConfigValidationError):
        # spaCy's config coerces some values it then accepts (2.0 for an int): only a refusal of a
        # good value is wrong
        assert not acceptable or isinstance(value, bool)
        return
    assert acceptable or type(value) in (float, bool), (name, value)
