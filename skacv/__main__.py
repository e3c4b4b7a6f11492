"""Command line: ``python -m skacv demo [options]`` (also the ``skacv`` script)."""

import argparse
import sys

from ._demo import DEMO_DEFAULTS, SEED_SIZE, run_demo


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m skacv",
        description="skacv: iterative linear estimators that estimate their own "
        "out-of-sample risk at every iteration.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    d, f = DEMO_DEFAULTS, SEED_SIZE
    demo = sub.add_parser(
        "demo",
        help="the seed notebook's ISTA experiment: true risk vs its estimate",
        description="Simulate the seed notebook's model (Gaussian X, s-sparse beta, "
        "noise sigma), fit the ISTA path of the Lasso with step (1+sqrt(p/n))^-2 and "
        "print, per iteration, the training MSE, the true out-of-sample risk "
        "||b_t - beta||^2 + sigma^2 and its estimate risk_path_ (Bellec & Tan 2024). "
        "Saves a PNG when matplotlib is installed. T counts the iterates t = 0..T-1 "
        "(T - 1 steps), as in the seed.",
    )
    add = demo.add_argument
    add("--n", type=int, help=f"samples (default {d['n']}; --full {f['n']})")
    add("--p", type=int, help=f"features (default {d['p']}; --full {f['p']})")
    add("--s", type=int, help=f"nonzero coefficients (default {d['s']}; --full {f['s']})")
    add("--T", type=int, help=f"iterates t = 0..T-1 (default {d['T']}; --full {f['T']})")
    add("--sigma", type=float, help=f"noise level (default {d['sigma']})")
    add("--alpha", type=float, help=f"Lasso penalty, the seed's lam (default {d['alpha']})")
    add("--seed", type=int, help=f"random seed of data and probes (default {d['seed']})")
    add("--m", type=int, help=f"Hutchinson probes n_probes (default {d['m']})")
    add("--solver", choices=("ista", "fista"), default="ista", help="default ista")
    add("--out", default="skacv_demo.png", help="PNG path (default skacv_demo.png)")
    add("--no-plot", action="store_true", help="do not save a figure")
    add("--full", action="store_true",
        help="the seed notebook's size n=10000 p=15000 s=1000 T=100 m=10 "
        "(about 1.2 GB for X, a minute or two); explicit options still win")
    return parser


def main(argv=None):
    """Entry point of ``python -m skacv`` and of the ``skacv`` script."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        try:
            run_demo(n=args.n, p=args.p, s=args.s, T=args.T, sigma=args.sigma,
                     alpha=args.alpha, seed=args.seed, m=args.m, solver=args.solver,
                     out=None if args.no_plot else args.out, full=args.full)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
