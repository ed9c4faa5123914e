"""The test suite: one folder per subpackage of spacy_structpref."""
