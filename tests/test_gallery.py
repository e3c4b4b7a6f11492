"""Every figure of every gallery example, as the rendered gallery shows it.

sphinx-gallery runs an example cell by cell (cells start at ``# %%``) and,
at the end of each cell, saves the figures that are open and closes them: a
figure drawn on in a later cell is rendered incomplete. This test runs each
``examples/plot_*.py`` the same way (Agg backend) and asserts that every axes
of every figure open at the end of a cell has drawn artists (lines, patches,
collections, images, tables or texts beyond the title), that bars start at
zero and that every figure has a title.

``SKACV_EXAMPLE_QUICK=1`` makes the examples shrink their sizes (see
``examples/README.txt``) so that the whole gallery runs in well under a
minute; the figures keep their layout.
"""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
plt = pytest.importorskip("matplotlib.pyplot")
pytest.importorskip("pandas")  # the examples print their tables with pandas

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))
# a cell separator of sphinx-gallery: "# %%" or a line of at least 20 "#"
_SEPARATOR = re.compile(r"^(?:# ?%%.*|#{20,}\s*)$", re.MULTILINE)


def cells(source):
    """The code cells of an example, split where sphinx-gallery splits them."""
    bounds = [0] + [m.start() for m in _SEPARATOR.finditer(source)] + [len(source)]
    return [source[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def figure_problems(fig):
    """What a reader of ``fig`` would miss: axes with nothing drawn in them
    (title and labels aside), bars whose value axis does not start at zero, a
    figure without any title."""
    from matplotlib.container import BarContainer

    problems = []
    for i, ax in enumerate(fig.axes):
        where = f"axes {i} ({ax.get_title()!r})"
        drawn = (ax.lines, ax.patches, ax.collections, ax.images, ax.tables, ax.texts,
                 ax.artists)
        if not any(len(group) for group in drawn):
            problems.append(f"{where} is empty")
        for bars in ax.containers:
            if isinstance(bars, BarContainer):
                horizontal = bars.orientation == "horizontal"
                scale = ax.get_xscale() if horizontal else ax.get_yscale()
                low = min(ax.get_xlim() if horizontal else ax.get_ylim())
                if scale == "linear" and low > 0:
                    problems.append(f"{where}: the bars start at {low:.3g}, not at 0")
    suptitle = fig._suptitle.get_text() if fig._suptitle is not None else ""
    if not suptitle and not any(ax.get_title() for ax in fig.axes):
        problems.append("no title")
    return problems


def test_cells_are_split_like_sphinx_gallery():
    source = '"""doc"""\n\n# %%\na = 1\n# %%\n# Text\n# ----\nb = 2\n' + "#" * 30 + "\nc = 3\n"
    parts = cells(source)
    assert len(parts) == 4
    assert parts[1].splitlines()[1] == "a = 1" and parts[3].splitlines()[1] == "c = 3"


def test_figure_problems_are_detected():
    fig, (a, b, c, d) = plt.subplots(1, 4)
    a.plot([0, 1])
    b.set_title("only a title")
    c.bar([0], [1])
    d.barh([0, 1], [3.0, 3.2])
    d.set_xlim(2.9, 3.3)
    assert figure_problems(fig) == ["axes 1 ('only a title') is empty",
                                    "axes 3 (''): the bars start at 2.9, not at 0"]
    b.plot([0, 1])
    d.set_xlim(0, 3.3)
    assert figure_problems(fig) == []
    b.set_title("")
    assert figure_problems(fig) == ["no title"]
    fig.suptitle("a figure")
    assert figure_problems(fig) == []
    plt.close(fig)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_axes_of_every_rendered_figure_has_content(path, monkeypatch, tmp_path):
    monkeypatch.setenv("SKACV_EXAMPLE_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    plt.close("all")
    namespace = {"__name__": "__main__", "__file__": str(path)}
    problems, n_figures = [], 0
    try:
        for k, code in enumerate(cells(path.read_text())):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(code, f"{path.name} (cell {k})", "exec"), namespace)
            # the end of a cell: what sphinx-gallery saves, then closes
            for num in plt.get_fignums():
                n_figures += 1
                fig = plt.figure(num)
                problems += [f"cell {k}, figure {num}: {problem}"
                             for problem in figure_problems(fig)]
            plt.close("all")
    finally:
        plt.close("all")
    assert not problems, problems
    assert n_figures >= 1, f"{path.name} shows no figure"


def test_getting_started_code_runs(monkeypatch, tmp_path):
    """Getting started (docs/tutorial/getting_started.py, which the docs build
    runs as sphinx-gallery does) runs cell by cell in one session, without a
    warning, and draws what its text says."""
    page = Path(__file__).resolve().parents[1] / "docs" / "tutorial" / "getting_started.py"
    blocks = cells(page.read_text())
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    namespace = {"__name__": "__main__"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning would print into the page
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            for k, code in enumerate(blocks):
                exec(compile(code, f"getting_started.py (cell {k})", "exec"), namespace)
        disp, fitted = namespace["disp"], namespace["fitted"]
        # the curve of the criterion used (whatever the default is) and the test error
        assert set(disp.lines_) >= {fitted.criterion_, "test"}
        assert disp.ax_.get_title().startswith("TrajectoryLasso (alpha=")
        assert namespace["est"].coef_path_.shape == (800, 61)
        # the curve drawn is the search's criterion path
        drawn = disp.lines_[fitted.criterion_].get_ydata()
        np.testing.assert_allclose(drawn, getattr(fitted, f"{fitted.criterion_}_path_"))
        # the display shows the curves' minimum region: the first iterates
        # (hundreds of times higher) do not flatten it to a line at 0
        low, high = disp.ax_.get_ylim()
        minima = [line.get_ydata().min() for line in disp.lines_.values()]
        first = max(line.get_ydata()[0] for line in disp.lines_.values())
        assert first > 100 * min(minima)  # what made the old default unreadable
        assert low <= min(minima) and max(minima) <= high
        assert high - low < 3 * min(minima)
    finally:
        plt.close("all")


def test_landing_page_example_runs(capsys):
    """The landing page's example (docs/index.rst) runs as it is and prints
    what its comments say: an alpha of the automatic grid and an iteration
    (early stopping pays there), and a test R^2 near 1."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "index.rst").read_text()
    block = re.search(r"^\.\. code-block:: python\n\n((?:(?: {4}.*)?\n)+)", page, re.MULTILINE)
    code = "\n".join(line[4:] for line in block.group(1).splitlines())
    assert len(code.strip().splitlines()) <= 12
    namespace = {"__name__": "__main__"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        exec(compile(code, "index.rst", "exec"), namespace)
    search = namespace["search"]
    assert search.search_ == "path" and search.best_iteration_ is not None
    printed = capsys.readouterr().out.splitlines()
    alpha = search.best_params_["alpha"]
    assert printed[0].startswith(f"{{'alpha': {alpha!r}}} {search.best_iteration_}")
    comment = re.search(r"# \{'alpha': ([0-9.]+)\.\.\.\} (\d+)", code)
    assert str(alpha).startswith(comment.group(1))
    assert search.best_iteration_ == int(comment.group(2))
    assert float(printed[1]) > 0.99
