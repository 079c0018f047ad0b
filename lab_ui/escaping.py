"""User text shown through ``st.markdown`` stays text."""
_MARKDOWN_SPECIALS = set("\\`*_{}[]()#+-.!|<>~$:")


def escape_markdown(text):
    """User text shown through st.markdown: every markdown character becomes a literal."""
    return "".join(f"\\{c}" if c in _MARKDOWN_SPECIALS else c for c in text)
