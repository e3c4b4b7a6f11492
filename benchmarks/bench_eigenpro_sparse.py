"""EigenPro on a sparse X: against SVC on the same sparse rows and against its own dense fit.

A bag-of-words design drawn as text is: ``--docs`` documents of 40-160 words
from a Zipf vocabulary of ``--vocab`` words, two classes whose documents
draw a tenth of their words from their own 200 topic words (with 20 % of
the labels flipped), TF-IDF rows of unit norm (scikit-learn's
``TfidfTransformer``): about 0.5 % of the entries are nonzero. Half the
documents train, half test. Per method, in one process, with one BLAS
thread: the fit's time, the test accuracy, and the time over ``SVC()``'s
(rbf, its defaults; it also takes the CSR rows); ``EigenProClassifier()``
on the dense copy of the same rows (its float32 blocks) where
``--dense`` asks for it.

    python benchmarks/bench_eigenpro_sparse.py
    python benchmarks/bench_eigenpro_sparse.py --docs 8000 --vocab 20000 --dense
"""

import argparse
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from skacv import EigenProClassifier


def documents(n_docs, vocab, seed):
    """``(X, y)``: TF-IDF rows (CSR) of a two-topic bag of words, labels with 20 % flipped."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n_docs)
    freq = 1.0 / np.arange(1, vocab + 1) ** 1.1
    freq /= freq.sum()
    topics = rng.choice(vocab, size=(2, 200), replace=False)
    rows, cols = [], []
    for i in range(n_docs):
        length = int(rng.integers(40, 161))
        n_topic = rng.binomial(length, 0.1)
        words = np.concatenate([rng.choice(vocab, size=length - n_topic, p=freq),
                                rng.choice(topics[y[i]], size=n_topic)])
        rows.append(np.full(words.size, i))
        cols.append(words)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    counts = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_docs, vocab))
    counts.sum_duplicates()
    X = TfidfTransformer().fit_transform(counts).tocsr()
    flip = rng.random(n_docs) < 0.2
    return X, np.where(flip, 1 - y, y)


def timed(make, X, y, Xt, yt):
    tic = time.perf_counter()
    model = make().fit(X, y)
    seconds = time.perf_counter() - tic
    return model, seconds, float(np.mean(model.predict(Xt) == yt))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=6000)
    ap.add_argument("--vocab", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dense", action="store_true",
                    help="also EigenProClassifier() on the dense copy of the rows")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    X, y = documents(args.docs, args.vocab, args.seed)
    half = args.docs // 2
    Xa, ya, Xb, yb = X[:half], y[:half], X[half:], y[half:]
    print(f"== {args.docs} documents, {args.vocab} words, density "
          f"{X.nnz / np.prod(X.shape):.4f}; {half} train, {args.docs - half} test")
    with threadpool_limits(1):
        svc, t_svc, a_svc = timed(SVC, Xa, ya, Xb, yb)
        print(f"{'SVC() (sparse)':<36} fit {t_svc:7.2f} s  accuracy {a_svc:.4f}")
        ep, t_ep, a_ep = timed(lambda: EigenProClassifier(random_state=0), Xa, ya, Xb, yb)
        print(f"{'EigenProClassifier() (sparse)':<36} fit {t_ep:7.2f} s  accuracy {a_ep:.4f}  "
              f"epochs {ep.n_iter_} (chosen {ep.selected_iter_}), q={ep.n_components_}, "
              f"batch {ep.batch_size_}, {ep.precision_}")
        print(f"  time / SVC's: {t_ep / t_svc:.2f}; accuracy - SVC's: {a_ep - a_svc:+.4f}")
        if args.dense:
            Da, Db = Xa.toarray(), Xb.toarray()
            dn, t_dn, a_dn = timed(lambda: EigenProClassifier(random_state=0), Da, ya, Db, yb)
            print(f"{'EigenProClassifier() (dense copy)':<36} fit {t_dn:7.2f} s  accuracy "
                  f"{a_dn:.4f}  epochs {dn.n_iter_} (chosen {dn.selected_iter_}), "
                  f"{dn.precision_}")
            print(f"  sparse time / dense copy's: {t_ep / t_dn:.2f}")


if __name__ == "__main__":
    main()
