"""The model layer: completions through litellm and the embedded model (``models``), the chat loop
that stores each turn (``chat``), and the offline SmolLM2 runtime (``local_model``,
``local_runtimes``). Nothing here is imported by ``import memorylab`` until it is used."""
