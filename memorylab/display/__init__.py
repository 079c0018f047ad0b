"""What the lab and notebooks show: figures (``viz``) and tree layouts (``treeview``), DataFrames
(``frames``) and notebook views (``notebook``)."""
