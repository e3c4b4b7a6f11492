"""Sphinx configuration of the skacv documentation.

Build (offline)::

    pip install -e ".[docs]"
    sphinx-build -W -n -b html docs docs/_build/html                  # runs the gallery
    sphinx-build -W -n -b html -D plot_gallery=0 docs docs/_build/html  # without it

``docs/check_pages.sh`` builds the site and checks its pages in a headless
browser. Links to Python, NumPy, SciPy, scikit-learn, joblib and Dask go
through intersphinx inventories written at build time
(``intersphinx_local.py``): the build needs no network.
"""

import os
import re
import sys

sys.path.insert(0, os.path.abspath(".."))
sys.path.insert(0, os.path.abspath("."))

from intersphinx_local import write_inventories  # noqa: E402

import skacv  # noqa: E402

project = "skacv"
author = "The skacv developers"
copyright = "2026, The skacv developers"
version = release = skacv.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "matplotlib.sphinxext.plot_directive",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "browser", "tutorial", "figures", "gen_modules/backreferences"] + [
    f"{gallery}/*.{ext}" for gallery in ("auto_examples", "auto_tutorial")
    for ext in ("ipynb", "py", "zip", "md5", "json")]
root_doc = "index"

# every cross-reference must resolve (``sphinx-build -n``)
nitpicky = True
intersphinx_mapping = write_inventories(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build", "intersphinx"))

html_theme = "pydata_sphinx_theme"
html_title = "skacv"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_js_files = ["enlarge.js"]
# the on-page table of contents names methods without their class
toc_object_entries_show_parents = "hide"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
    "navigation_with_keys": False,
    "show_prev_next": True,
}
html_sidebars = {"index": [], "auto_tutorial/getting_started": []}
html_show_sourcelink = False

# the landing page's figure (``.. plot::``): the code stays out of the page
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 110)]
plot_rcparams = {"figure.figsize": (9, 4.2)}

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": True}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
default_role = "literal"

sphinx_gallery_conf = {
    # the examples, and Getting started (run at build time: its outputs and
    # figure are real)
    "examples_dirs": ["../examples", "tutorial"],
    "gallery_dirs": ["auto_examples", "auto_tutorial"],
    "filename_pattern": r"/(plot_|getting_started)",
    "doc_module": ("skacv",),
    "backreferences_dir": "gen_modules/backreferences",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "min_reported_time": 1,
    "write_computation_times": False,
    "image_srcset": ["2x"],
}


def _check_api_coverage(app):
    """Every public name of ``skacv.__all__`` must appear in api.rst."""
    from sphinx.util import logging

    with open(os.path.join(app.srcdir, "api.rst")) as fh:
        api = fh.read()
    # a module is documented through its members (``   exceptions.DivergenceError``)
    missing = [name for name in skacv.__all__
               if f"\n   {name}\n" not in api and f"\n   {name}." not in api]
    if missing:
        logging.getLogger(__name__).warning(
            "api.rst does not document these public names of skacv: %s", missing
        )


def _skip_scikit_learn_members(app, what, name, obj, skip, options):
    """Document skacv's own methods; skip those inherited from scikit-learn
    (get_params, set_*_request, ...), whose docstrings cross-reference the
    scikit-learn documentation."""
    module = getattr(obj, "__module__", None) or ""
    if module.startswith("sklearn"):
        return True
    return skip


_TRAILING_UNDERSCORE = re.compile(r"(?<=[A-Za-z0-9])_(?=\s*[-+*/,.)\]])")


def _escape_shapes(app, what, name, obj, options, lines):
    """``shape (n_iter_ + 1,)``: a trailing underscore is an RST reference;
    escape it in shape specifications."""
    for i, line in enumerate(lines):
        if "shape" in line:
            lines[i] = _TRAILING_UNDERSCORE.sub(r"\\_", line)


def setup(app):
    app.connect("autodoc-process-docstring", _escape_shapes, priority=400)
    app.connect("builder-inited", _check_api_coverage)
    app.connect("autodoc-skip-member", _skip_scikit_learn_members)
