"""The knowledge base (:mod:`.base`) and the ``knowledge`` plugin's tools (:mod:`.tools`)."""
