"""What an agent remembers beyond one history: the memory manager keyed by identities (``manager``,
``identity``), the KV store (``kv``), cross-agent admin (``admin``) and long-term records with
their model steps (``longterm``, ``longterm_model``)."""
