"""The docs site's one hook (mkdocs.yml, ``hooks``).

* The docstrings cite other objects with Sphinx roles (``:class:`Config```, ``:func:`~tfa_sim.run```), which
  mkdocstrings renders as the role's text before the code; the rendered page keeps the code and drops the role,
  with ``~`` showing the last dotted name as Sphinx does.
* The example notebook's cells link the guides as files (``../guide/python-api.md``), which is right in Jupyter;
  mkdocs-jupyter renders them as they are, so the notebook's page points each at the page's address instead,
  and a link to a page that does not exist is a warning (a failure under ``--strict``).
"""
from __future__ import annotations

import logging
import posixpath
import re
from typing import Any

#: A Sphinx role before the code span mkdocstrings made of its target.
ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj):<code>(~?)([^<]*)</code>")
#: A relative link to a Markdown file in rendered HTML: its path and its #anchor.
MD_LINK = re.compile(r'href="(?![a-z][a-z0-9+.-]*:|/|#)([^"#]+\.md)(#[^"]*)?"')
log = logging.getLogger("mkdocs.hooks")


def on_page_content(html: str, page: Any = None, files: Any = None, **_: Any) -> str:
    """The page's HTML with each role dropped from before its code span, and a notebook's links to pages made
    the pages' addresses."""
    html = ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>", html)
    if page is not None and files is not None and page.file.src_uri.endswith(".ipynb"):
        html = MD_LINK.sub(lambda m: _address(m, page, files), html)
    return html


def _address(link: re.Match[str], page: Any, files: Any) -> str:
    target = posixpath.normpath(posixpath.join(posixpath.dirname(page.file.src_uri), link[1]))
    file = files.get_file_from_path(target)
    if file is None:
        log.warning("%s links to %s, which is not a page of the site", page.file.src_uri, target)
        return link[0]
    return f'href="{file.url_relative_to(page.file)}{link[2] or ""}"'
