"""What the lab and notebooks show: figures (``viz``) and tree layouts (``treeview``), DataFrames
(``frames``), notebook views (``notebook``) and the sample conversations (``samples``)."""
