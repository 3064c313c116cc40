"""The docs site's one hook (mkdocs.yml, ``hooks``): the docstrings cite other objects with Sphinx roles
(``:class:`Config```, ``:func:`~tfa_sim.run```), which mkdocstrings renders as the role's text before the code;
the rendered page keeps the code and drops the role, with ``~`` showing the last dotted name as Sphinx does."""
from __future__ import annotations

import re
from typing import Any

#: A Sphinx role before the code span mkdocstrings made of its target.
ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj):<code>(~?)([^<]*)</code>")


def on_page_content(html: str, **_: Any) -> str:
    """The page's HTML with each role dropped from before its code span."""
    return ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>", html)
