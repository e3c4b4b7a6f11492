"""Command line: ``python -m skacv demo [options]`` (also the ``skacv`` script).

Every option is checked before any work starts (the memory the run needs,
and the output file, opened for writing): a user mistake ends with one
line, ``<prog> demo: error: <message>`` naming the option and the fix, exit
status 2, nothing printed before it and no traceback. Stages longer than a
few seconds report their progress on stderr.
"""

import argparse
import math
import sys

from ._demo import run_demo
from ._demo_checks import DEMO_DEFAULTS, SEED_SIZE, check_output_path, demo_params


def _whole_number(text):
    """argparse type: an integer written as such (``"10"``, not ``"1.5"``)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _number(text):
    """argparse type: a finite real number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, whose errors are one line: the message and where the help is
    (no usage block above it)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the "
                  "options)\n")


def _parser(prog="skacv"):
    """The command-line parser; returns ``(parser, demo_subparser)``."""
    parser = _Parser(
        prog=prog,
        description="skacv: iterative linear estimators that estimate their own "
        "out-of-sample risk at every iteration.",
    )
    # the package, imported before its __main__ (and in its layer), from sys.modules
    package = sys.modules.get(__package__ or "skacv")
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {getattr(package, '__version__', 'unknown')}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    d, f = DEMO_DEFAULTS, SEED_SIZE
    demo = sub.add_parser(
        "demo",
        help="the seed notebook's ISTA experiment, then early stopping: the estimate's "
        "choice against the oracle and K-fold CV",
        description="Simulate the seed notebook's model (Gaussian X, s-sparse beta, "
        "noise sigma), fit the ISTA path of the Lasso with step (1+sqrt(p/n))^-2 and "
        "print, per iteration, the training MSE, the true out-of-sample risk "
        "||b_t - beta||^2 + sigma^2 and its estimate risk_path_ (Bellec & Tan 2024). "
        "Then, on the same design with heavier noise and a smaller penalty (--stop-sigma, "
        "--stop-alpha), where the true risk has a minimum along the path: the iteration "
        "chosen by the estimate, the oracle and 5-fold CV along the path. "
        "Saves a PNG when matplotlib is installed (pip install matplotlib) and prints "
        "its path. T counts the iterates t = 0..T-1 (T - 1 steps), as in the seed.",
    )
    add = demo.add_argument
    for key, kind, what in (
            ("n", _whole_number, "samples, at least 2"),
            ("p", _whole_number, "features"),
            ("s", _whole_number, "nonzero coefficients, at most p"),
            ("T", _whole_number, "iterates t = 0..T-1, at least 2"),
            ("sigma", _number, "noise level, >= 0"),
            ("alpha", _number, "Lasso penalty, the seed's lam, >= 0"),
            ("seed", _whole_number, "random seed of data and probes, 0 to 2**32-1"),
            ("m", _whole_number, "Hutchinson probes n_probes"),
            ("stop_sigma", _number, "noise level of the early-stopping part, >= 0"),
            ("stop_alpha", _number, "Lasso penalty of the early-stopping part, >= 0")):
        full = f"; --full {f[key]}" if key in ("n", "p", "s", "T") else ""
        add("--" + key.replace("_", "-"), type=kind, help=f"{what} (default {d[key]}{full})")
    add("--solver", choices=("ista", "fista"), default="ista", help="default ista")
    add("--out", default="skacv_demo.png",
        help="image file of the figure, in an existing writable directory; the format "
        "follows the extension (default skacv_demo.png)")
    add("--no-plot", action="store_true", help="do not save a figure")
    add("--full", action="store_true",
        help="the seed notebook's size n=10000 p=15000 s=1000 T=100 m=10 "
        "(about 1.2 GB for X, a few minutes); explicit options still win")
    return parser, demo


def demo_arguments(argv=None, *, prog="skacv"):
    """Parse the command line ``argv`` (``None``: ``sys.argv[1:]``) and
    check every option, before any work; ``prog``: the program name in the
    usage and error messages. Returns the keyword arguments of
    :func:`~skacv._demo.run_demo`; a user mistake exits with status 2
    (``SystemExit``) and a one-line message.
    """
    parser, demo = _parser(prog)
    args = parser.parse_args(argv)
    try:
        params = demo_params(**{k: getattr(args, k) for k in DEMO_DEFAULTS}, full=args.full,
                             option=lambda k: f"--{k}")
        out = None if args.no_plot else str(check_output_path(args.out, name="--out"))
    except ValueError as exc:
        demo.error(str(exc))
    return dict(solver=args.solver, out=out, **params)


def main(argv=None, *, prog="skacv"):
    """Entry point of the ``skacv`` script and of ``python -m skacv``
    (``argv`` and ``prog`` as in :func:`demo_arguments`; ``python -m skacv``
    passes ``prog="python -m skacv"``). Returns the exit status: 0 on
    success, 130 when interrupted (Ctrl-C, no traceback); a user mistake
    exits with status 2 (:func:`demo_arguments`), before any work starts.
    """
    kwargs = demo_arguments(argv, prog=prog)
    try:
        run_demo(**kwargs)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130  # the shell's status for Ctrl-C
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m skacv"))
