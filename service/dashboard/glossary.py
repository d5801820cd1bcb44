"""The user glossary (docs/glossary.md, shipped in this package) as an HTML page with an anchor per term, and
the links the dashboard's pages make to those anchors."""

from __future__ import annotations

import re
from functools import cache
from html import escape
from importlib.resources import files

from markdown_it import MarkdownIt
from markdown_it.token import Token

GLOSSARY_PATH = "/glossary"


def term_anchor(term: str) -> str:
    """A glossary term's anchor: its bold name up to the first comma or colon, lower-cased, its words joined by
    ``-`` (``Overlap, `m``` -> ``overlap``, ``Held-out human, won / lost / open`` -> ``held-out-human``)."""
    head = re.split(r"[,:]", term, maxsplit=1)[0]
    return "-".join(re.findall(r"[a-z0-9_]+", head.lower()))


def term_link(text: str, term: str) -> str:
    """``text`` (escaped here) as a link to the glossary entry whose bold name begins with ``term``."""
    return f'<a class="term" href="{GLOSSARY_PATH}#{term_anchor(term)}">{escape(text)}</a>'


def _anchored(tokens: list[Token]) -> list[Token]:
    """The glossary's tokens with an ``id`` on each term's list item, and its links to other pages of docs/
    (not served) turned into plain text."""
    for k, token in enumerate(tokens):
        if token.type == "list_item_open":
            inline = next(t for t in tokens[k:] if t.type == "inline")
            term = re.match(r"\*\*(.+?)\*\*", inline.content)
            if term:
                token.attrSet("id", term_anchor(term.group(1)))
        if token.type == "inline" and token.children:
            kept, in_relative_link = [], False
            for child in token.children:
                if child.type == "link_open" and not str(child.attrGet("href") or "").startswith(("http", "#")):
                    in_relative_link = True
                elif child.type == "link_close" and in_relative_link:
                    in_relative_link = False
                else:
                    kept.append(child)
            token.children = kept
    return tokens


@cache
def glossary_page() -> str:
    """The glossary as a page; every term's list item has the id :func:`term_anchor` gives its bold name."""
    renderer = MarkdownIt("commonmark", {"html": False})
    text = (files("service.dashboard") / "glossary.md").read_text(encoding="utf-8")
    body = renderer.renderer.render(_anchored(renderer.parse(text)), renderer.options, {})
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>annoplan: glossary</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:720px;color:#222;line-height:1.4}}
li{{margin:.4em 0}} li:target{{background:#fbeec0}}</style></head><body>
<div class="note"><a href="/dashboard">all projects</a></div>
{body}</body></html>"""
