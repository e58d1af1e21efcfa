"""L2 documents: the store (:mod:`.store`), ranking and fusion, the lexical index (:mod:`.lexical`),
the int8 vectors and the compiled loops of their queries (:mod:`.native`)."""
