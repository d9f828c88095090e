"""PyTorch peer for bench/knn_gpu.c: exact kNN as a user would write it, torch.cdist +
torch.topk chunked over the queries (and the GEMM form, addmm + topk: "<case>/gemm"), fp32 with TF32 off, host arrays in and out (the
copies are timed, as gpuml's are). Prints "RESULT <case> <ms>" lines; skips gracefully
when torch or a GPU is missing.

    python3 bench/knn_torch.py            all cases (GPUML_BENCH_SKIP_LARGE=1 skips n = 1e6)
    python3 bench/knn_torch.py --only NAME[,NAME]   those cases (after the warm-up)
"""
import os
import sys
import time


def main():
    try:
        import torch
    except Exception as e:  # pragma: no cover
        print(f"torch not available ({e}); skipping the PyTorch peer")
        return 0
    if not torch.cuda.is_available():
        print("torch sees no GPU; skipping the PyTorch peer")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")

    def knn(data_h, query_h, k):
        # host -> device, chunked cdist + topk, device -> host
        data = data_h.to(dev, non_blocking=False)
        query = query_h.to(dev, non_blocking=False)
        n = data.shape[0]
        # distance chunk of at most ~2 GB
        chunk = max(1, min(query.shape[0], (1 << 29) // n))
        idx_parts, dist_parts = [], []
        for s in range(0, query.shape[0], chunk):
            dmat = torch.cdist(query[s:s + chunk], data)
            v, i = torch.topk(dmat, k, dim=1, largest=False, sorted=True)
            dist_parts.append(v)
            idx_parts.append(i)
            del dmat
        idx = torch.cat(idx_parts).cpu()
        dist = torch.cat(dist_parts).cpu()
        return idx, dist

    def knn_gemm(data_h, query_h, k):
        # the GEMM form: |q|^2 + |x|^2 - 2 q.x, chunked, topk of the squared distances
        data = data_h.to(dev, non_blocking=False)
        query = query_h.to(dev, non_blocking=False)
        n = data.shape[0]
        dn = (data * data).sum(1)
        chunk = max(1, min(query.shape[0], (1 << 29) // n))
        idx_parts, dist_parts = [], []
        for s in range(0, query.shape[0], chunk):
            q = query[s:s + chunk]
            dmat = torch.addmm(dn.unsqueeze(0), q, data.t(), alpha=-2.0)
            dmat += (q * q).sum(1, keepdim=True)
            v, i = torch.topk(dmat, k, dim=1, largest=False, sorted=True)
            dist_parts.append(v.clamp_min_(0).sqrt_())
            idx_parts.append(i)
            del dmat
        return torch.cat(idx_parts).cpu(), torch.cat(dist_parts).cpu()

    def run(name, n, m, d, k, reps, form=None):
        if form is None:
            run(name, n, m, d, k, reps, knn)
            if name != "warmup":
                run(name + "/gemm", n, m, d, k, reps, knn_gemm)
            return
        g = torch.Generator().manual_seed(1)
        data_h = torch.rand(n, d, generator=g, dtype=torch.float32)
        query_h = torch.rand(m, d, generator=g, dtype=torch.float32)
        best = float("inf")
        try:
            for _ in range(reps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                form(data_h, query_h, k)
                torch.cuda.synchronize()
                best = min(best, (time.perf_counter() - t0) * 1e3)
        except Exception as e:
            print(f"{name}: FAILED: {e}")
            torch.cuda.empty_cache()
            return
        print(f"{name}: {best:.1f} ms (best of {reps})")
        print(f"RESULT {name} {best:.1f}")
        sys.stdout.flush()
        torch.cuda.empty_cache()

    only = None
    if "--only" in sys.argv[1:-1]:
        only = set(sys.argv[sys.argv.index("--only") + 1].split(","))
    run_case = run

    def run(name, *args):  # noqa: F811 (the cases, filtered by --only)
        if only is None or name == "warmup" or name.split("/")[0] in only:
            run_case(name, *args)

    run("warmup", 4096, 4096, 128, 16, 1)
    run("n=65536_d=128_k=16", 65536, 65536, 128, 16, 3)
    run("n=65536_d=784_k=16", 65536, 65536, 784, 16, 3)
    run("n=65536_d=2_k=16", 65536, 65536, 2, 16, 3)
    run("n=65536_d=128_k=1024", 65536, 65536, 128, 1024, 2)
    run("n=65536_d=128_k=4096", 65536, 65536, 128, 4096, 1)
    run("n=500000_d=64_k=8_m=100000", 500000, 100000, 64, 8, 3)
    skip = os.environ.get("GPUML_BENCH_SKIP_LARGE", "")
    if not (skip and skip != "0"):
        run("n=1000000_d=128_k=10", 1000000, 1000000, 128, 10, 1)
        run("n=1000000_d=768_k=100_m=10000", 1000000, 10000, 768, 100, 3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
