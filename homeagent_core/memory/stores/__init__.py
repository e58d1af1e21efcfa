"""One storage interface per memory tier, implemented by the SQLite and PostgreSQL backends.

Each module names what its tier's callers use, as an abstract base class (with the logic the
backends share) or a Protocol:

* :mod:`~homeagent_core.memory.stores.documents`: :class:`BaseDocumentStore` (an abstract base
  class holding the logic both document backends share, and running their blocking work off the
  event loop);
* :mod:`~homeagent_core.memory.stores.graph`: ``GraphSQL``;
* :mod:`~homeagent_core.memory.stores.log`: ``ConversationLog``;
* :mod:`~homeagent_core.memory.stores.media`: ``MediaIndex``;
* :mod:`~homeagent_core.memory.stores.knowledge`: ``KnowledgeStorage``;
* :mod:`~homeagent_core.memory.stores.settings`: ``SharedSettings``.

The Protocols are still defined beside the stores that use them (``memory/graph/sql.py``,
``memory/textlog.py``, ``memory/media.py``, ``memory/knowledge/base.py``, ``config.py``); import
them from here. Every backend class names the interface it implements as its base class, so the type
checker holds each one to it.

The embedded SQLite classes live beside the memory they serve (``homeagent_core.memory``), the
PostgreSQL ones in :mod:`homeagent_core.memory.stores.postgresql`;
:mod:`homeagent_core.memory.stores.factory` opens the one ``core.memory.store`` names and returns
the interface type.
"""
