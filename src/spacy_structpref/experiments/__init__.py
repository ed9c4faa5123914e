"""The paper experiments built on the library: the first-pass attachment
tables and pictures of Menchetti et al. (2005, §6.3; :mod:`.attachment_tables`,
:mod:`.attachment_pictures`) and the PARSEVAL rows of the reranking
experiment in the form of their Table 3 (:mod:`.reranking_tables`)."""
