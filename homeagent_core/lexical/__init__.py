"""The lexical scheme every memory tier searches with: terms, query terms and BM25 arithmetic.

One scheme for the document store, the graph's keyword seeds and the knowledge base:

* :mod:`.terms` — normalisation, Latin and CJK words and their padded 2–4-grams, stop words
  (:data:`~.terms.TERMS_VERSION` names the scheme);
* :mod:`.buckets` — grams hashed into buckets, a text's term counts and their stored form,
  a query's buckets with the word each belongs to;
* :mod:`.bm25` — the BM25 arithmetic (idf shared among a Chinese word's grams, saturated tf,
  length norm) and the scores of a few texts;
* :mod:`.collection` — a small in-memory BM25 index, updated entry by entry (the knowledge base);
* :mod:`.segmenter` / :mod:`.jieba_dict` — the one jieba, on a compact dictionary.

The document store's on-disk index (postings, forward lists, snapshots, compiled loops) lives in
:mod:`homeagent_core.memory.documents.lexical` and builds on these. This package sits below
every layer (the ``shared`` import contract): it imports only the SDK.
"""
