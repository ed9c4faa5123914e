"""Thinc models: the DISTRO tagger (``DistroTagger.v1``), the sparse indicator
embedder (``SparseFeatures.v1``) and the batched Cython Viterbi they decode with;
the span-CRF parser's scorer (``SpanCRF.v1``)."""
