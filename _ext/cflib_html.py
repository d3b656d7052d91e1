"""A Sphinx extension of the book: each script a page loads, once.

Jupyter Book 1 registers the inline configuration scripts of sphinx-thebe and
sphinx-togglebutton twice; the second ``const THEBE_JS_URL`` is a SyntaxError in every
page's console.  This drops repeated scripts from each page's context.
"""


def _once(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for js in context.get("script_files", []):
        # the two copies differ only in a filename of None or "" (inline scripts)
        key = (getattr(js, "filename", None) or "",
               tuple(sorted((k, str(v)) for k, v in getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    context["script_files"] = kept


def setup(app):
    app.connect("html-page-context", _once, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
