"""scikit-learn's GaussianMixture on the cases of bench/gmm_gpu.c, for the table in
bench/RESULTS.md: the time of one EM iteration, from fits of 5 and 5 + ITER iterations
from the same start (tol = 0, the same random_state), each the best of 3, so that the
k-means start does not count. scikit-learn computes on the CPU with the
BLAS threads of numpy (all cores of the machine).

    python3 bench/gmm_sklearn.py            # n = 200,000 x 50 and 60,000 x 784
    GMM_SKLEARN_LARGE=1 python3 bench/gmm_sklearn.py   # also n = 10^6 x 50 (minutes)

Prints "RESULT <case> <ms per iteration>" lines with the names bench/gmm_gpu.c uses.
numpy and scikit-learn only.
"""
import os
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture


def clustered(n, d, G, rng):
    centres = 8 * rng.random((G, d))
    return centres[np.arange(n) % G] + rng.standard_normal((n, d))


def fit_ms(x, G, cov, iters):
    gm = GaussianMixture(n_components=G, covariance_type=cov, max_iter=iters, tol=0.0,
                         reg_covar=1e-6, init_params="k-means++", random_state=7)
    t0 = time.perf_counter()
    gm.fit(x)
    return (time.perf_counter() - t0) * 1e3, gm


def bench(n, d, G, cov, iters):
    name = f"gmm_n{n}_d{d}_k{G}_{cov}"
    x = clustered(n, d, G, np.random.default_rng(1))
    fit_ms(x, G, cov, 1)  # warm-up (threads, caches)
    # best of 3 fits of 5 and 5 + iters iterations: never the difference of single runs
    t1 = min(fit_ms(x, G, cov, 5)[0] for _ in range(3))
    runs = [fit_ms(x, G, cov, 5 + iters) for _ in range(3)]
    t2 = min(t for t, _ in runs)
    gm = runs[-1][1]
    per = (t2 - t1) / iters
    print(f"{name:34s} {per:10.1f} ms per iteration (scikit-learn, {os.cpu_count()} cores); "
          f"lower bound after {gm.n_iter_} iterations {gm.lower_bound_:.6g}", flush=True)
    print(f"RESULT {name} {per:.3f}", flush=True)


def main():
    warnings.simplefilter("ignore", ConvergenceWarning)
    import sklearn
    print(f"scikit-learn {sklearn.__version__}, numpy {np.__version__}, "
          f"{os.cpu_count()} cores", flush=True)
    if os.environ.get("GMM_SKLEARN_LARGE"):
        bench(1000000, 50, 16, "full", 2)
        bench(1000000, 50, 16, "diag", 3)
    bench(200000, 50, 16, "full", 3)
    bench(60000, 784, 10, "full", 2)


if __name__ == "__main__":
    main()
