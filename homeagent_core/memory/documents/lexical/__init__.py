"""The documents' character n-gram BM25 index: postings, forward rows, snapshot and scoring."""
