"""L3 graph: the store (:mod:`.store`), its SQL, the CSR mirror and its file, recall and analytics."""
