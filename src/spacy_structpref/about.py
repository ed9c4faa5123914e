__title__ = "spacy-structpref"
__version__ = "0.1.0"
