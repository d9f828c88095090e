"""scikit-learn's TSNE on Fashion-MNIST, for the side-by-side table with bench/tsne_gpu.c.

Same data and quality measures as tsne_gpu.c: the first n of the 70,000 images
(training then test), pixels / 255, PCA to 50 dimensions (sklearn's PCA), perplexity 30,
1000 iterations, init "pca", learning rate "auto", 16 threads (n_jobs); 10-NN label
accuracy in the embedding (leave-one-out majority vote, ties to the nearer neighbour)
and 10-NN preservation (the share of each point's 10 nearest neighbours in pixel space
kept among its 10 nearest in the embedding). The time covers PCA + TSNE, as gpuml's
covers PCA + kNN + P + optimisation.

    python3 bench/tsne_sklearn.py [--data DIR] [--n 20000 ...] [--jobs 16]

DIR holds the four IDX .gz files (default /usr/share/datasets/fashion-mnist, then
./bench-data). Prints "RESULT sklearn_fmnist<n/1000>k <ms>" lines. numpy and
scikit-learn only.
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np
import sklearn
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE
from sklearn.neighbors import NearestNeighbors


def read_idx(path, header):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=header)


def fashion_mnist(directory, n):
    images, labels = [], []
    for stem in ("train", "t10k"):
        img = read_idx(os.path.join(directory, stem + "-images-idx3-ubyte.gz"), 16)
        lab = read_idx(os.path.join(directory, stem + "-labels-idx1-ubyte.gz"), 8)
        images.append(img.reshape(-1, 784))
        labels.append(lab)
    x = np.concatenate(images)[:n].astype(np.float64) / 255.0
    return x, np.concatenate(labels)[:n].astype(np.int64)


def neighbours(x, k, jobs):
    nn = NearestNeighbors(n_neighbors=k + 1, algorithm="brute", n_jobs=jobs).fit(x)
    idx = nn.kneighbors(x, return_distance=False)
    out = np.empty((x.shape[0], k), dtype=np.int64)
    for i in range(x.shape[0]):  # drop the point itself, wherever the ties put it
        row = idx[i][idx[i] != i]
        out[i] = row[:k]
    return out


def label_accuracy(idx, labels):
    hits = 0
    for i in range(idx.shape[0]):
        votes = labels[idx[i]]
        counts = np.bincount(votes, minlength=labels.max() + 1)
        best = set(np.flatnonzero(counts == counts.max()))
        predicted = next(v for v in votes if v in best)  # ties: the nearer neighbour
        hits += predicted == labels[i]
    return hits / idx.shape[0]


def preservation(a, b):
    return np.mean([len(np.intersect1d(a[i], b[i])) for i in range(a.shape[0])]) / a.shape[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None)
    ap.add_argument("--n", type=int, nargs="*", default=[20000])
    ap.add_argument("--jobs", type=int, default=16)
    args = ap.parse_args()
    dirs = [args.data] if args.data else ["/usr/share/datasets/fashion-mnist", "bench-data"]
    directory = next((d for d in dirs if os.path.exists(os.path.join(d, "t10k-labels-idx1-ubyte.gz"))), None)
    if directory is None:
        sys.exit("Fashion-MNIST not found: pass --data DIR holding the four IDX .gz files")
    print("scikit-learn %s, numpy %s, n_jobs %d" % (sklearn.__version__, np.__version__, args.jobs))
    for n in args.n:
        x, labels = fashion_mnist(directory, n)
        t0 = time.perf_counter()
        pcs = PCA(n_components=50, random_state=0).fit_transform(x)
        kwargs = dict(n_components=2, perplexity=30.0, init="pca", learning_rate="auto",
                      n_jobs=args.jobs, random_state=0)
        try:
            tsne = TSNE(max_iter=1000, **kwargs)
        except TypeError:  # scikit-learn < 1.5
            tsne = TSNE(n_iter=1000, **kwargs)
        y = tsne.fit_transform(pcs)
        seconds = time.perf_counter() - t0
        acc = label_accuracy(neighbours(y, 10, args.jobs), labels)
        pres = preservation(neighbours(x, 10, args.jobs), neighbours(y, 10, args.jobs))
        name = "sklearn_fmnist%dk" % (n // 1000)
        print("RESULT %s %.1f" % (name, seconds * 1e3))
        print("%-22s n = %7d: %7.2f s, KL %.4f, 10-NN accuracy %.4f, 10-NN preservation %.4f"
              % (name, n, seconds, tsne.kl_divergence_, acc, pres))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
