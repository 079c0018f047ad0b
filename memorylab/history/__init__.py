"""A session's history: the message tree (``session``), compaction overlays and how they apply
(``overlays``), planning and running a compaction (``compaction``), shortening single messages
(``truncation``), the character-bounded chat window (``window``), what fills a request (``budget``)
and which facts a summary kept (``facts``)."""
