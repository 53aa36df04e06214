#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Keel's built-in operations against PyTorch eager, in one process, on the
same tensors.

Every input is a fresh random torch tensor (torch.randn from a seed printed
at start), handed to Keel without a copy through DLPack (keel.from_dlpack:
the same memory), so both sides read the very same bytes; Keel writes into
torch tensors imported the same way. Before a row is timed, Keel's result
and torch's are checked against a float64 reference computed by torch on the
same inputs; a row whose result is wrong is WRONG and not timed. Both sides
are timed the same way: batches of calls of about 10 ms, one synchronization
each (Keel's stream, or torch's device), Keel's and torch's batches
alternating (Keel first in every other pair) for 15 pairs (5 with --quick).
A row prints the median times and the median of the pairs' ratios
torch time / Keel time (> 1: Keel is faster) with their smallest and largest,
against its target; the last lines are one summary line per row.

Targets (ratio at least): add, GELU and the sums 0.97 (all bound by
memory, as torch's are: on an H100 both sides' whole-array sum reads at
1.03 of a copy's bandwidth); softmax and layer norm 1.0, and 1.15 where torch
leaves bandwidth unused (softmax 4096 to 65536 columns, layer norm 4096 to
65536; bf16 layer norm is shown with no target); the dense layer bf16
relu(linear(x)): 1.1 at 4096^3 and 2.5 at
4096 x 64 x 4096 (out x batch x in), where torch pays a separate ReLU pass.

Usage (KEEL_BACKEND=cuda; the keel package importable, e.g. built with
KEEL_BUILD_DIR=<builddir> pip install --target DIR ./python and PYTHONPATH=DIR):
  KEEL_BACKEND=cuda python3 kernels/bench/torch_ops.py [--quick] [--seed N] [SUBSTRING...]
Exit status: 0 every target met, 1 a target missed or a result wrong,
3 an error (keel or torch missing, no CUDA device).
"""
import argparse
import math
import statistics
import sys
import time
import traceback

SUMMARY = []  # (name, measured, lo, hi, target, verdict)


def record(name, measured, lo, hi, target, verdict):
    SUMMARY.append((name, measured, lo, hi, target, verdict))


def batch_reps(fn, sync):
    """Calls per batch so that a batch takes about 10 ms (after a warm-up)."""
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    sync()
    one = (time.perf_counter() - t0) / 3
    return max(1, min(2000, int(0.01 / max(one, 1e-7))))


def batch_time(fn, sync, reps):
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


class Bench:
    def __init__(self, torch, keel, quick, filters):
        self.torch, self.keel, self.quick, self.filters = torch, keel, quick, filters
        self.kdev = keel.default_device()
        if self.kdev.backend != "cuda":
            raise RuntimeError("Keel's device is %s, not CUDA: run with KEEL_BACKEND=cuda" % self.kdev.name)
        self.kstream = self.kdev.default_stream

    def ksync(self):
        self.kstream.synchronize()

    def tsync(self):
        self.torch.cuda.synchronize()

    def wanted(self, name):
        return not self.filters or any(f in name for f in self.filters)

    def k(self, t):
        """The torch tensor t as a Keel array: the same memory."""
        return self.keel.from_dlpack(t)

    def check(self, name, got, ref, rtol, atol, what):
        """got (Keel's or torch's result) against ref (float64) elementwise:
        |got - ref| <= atol + rtol |ref|, atol a number or a tensor."""
        err = (got.double() - ref).abs()
        tol = rtol * ref.abs() + atol
        ok = bool((err <= tol).all().item())  # a NaN fails: NaN <= tol is false
        worst = float((err / tol.clamp_min(1e-300)).max().item())
        print("check %s, %s: %s (worst error %.2f of the tolerance)" % (name, what, "holds" if ok else "WRONG", worst),
              flush=True)
        return ok

    def row(self, name, work, unit, keel_fn, torch_fn, target, checks):
        """checks: a function that runs after one call of each side and
        returns whether both results hold."""
        keel_fn()
        self.ksync()
        torch_out = torch_fn()
        self.tsync()
        if not checks(torch_out):
            print("%-40s not timed: a result is wrong (above)" % name, flush=True)
            record(name, math.nan, math.nan, math.nan, target, "WRONG")
            return
        rk = batch_reps(keel_fn, self.ksync)
        rt = batch_reps(torch_fn, self.tsync)
        tks, tts, ratios = [], [], []
        for r in range(5 if self.quick else 15):
            if r % 2:
                tk = batch_time(keel_fn, self.ksync, rk)
                tt = batch_time(torch_fn, self.tsync, rt)
            else:
                tt = batch_time(torch_fn, self.tsync, rt)
                tk = batch_time(keel_fn, self.ksync, rk)
            tks.append(tk)
            tts.append(tt)
            ratios.append(tt / tk)
        tk, tt, ratio = statistics.median(tks), statistics.median(tts), statistics.median(ratios)
        verdict = "INFO" if not target else ("PASS" if ratio >= target else "FAIL")
        print("%-40s keel %10.2f us %9.1f %-7s | torch %10.2f us %9.1f %-7s | ratio %.3f [%.3f..%.3f] %-7s %s" %
              (name, tk * 1e6, work / tk * 1e-9, unit, tt * 1e6, work / tt * 1e-9, unit, ratio, min(ratios),
               max(ratios), (">= %.2f" % target) if target else "-", verdict), flush=True)
        record(name, ratio, min(ratios), max(ratios), target, verdict)


def softmax_target(cols):
    return 1.15 if 4096 <= cols <= 65536 else 1.0


def layernorm_target(cols):
    return 1.15 if 4096 <= cols <= 65536 else 1.0


def run(b, seed):
    torch, keel, F = b.torch, b.keel, b.torch.nn.functional
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=dev, dtype=torch.float32, generator=gen).to(dtype)

    n = 1 << (26 if b.quick else 28)
    ta, tb = randn(n), randn(n)
    ky_t = torch.empty(n, device=dev)
    ka, kb, ky = b.k(ta), b.k(tb), b.k(ky_t)
    b.tsync()

    name = "add f32 n=2^%d" % int(math.log2(n))
    if b.wanted(name):
        ty = torch.empty(n, device=dev)

        def chk(t_out):
            ref = ta.double() + tb.double()
            return b.check(name, ky_t, ref, 2 ** -24, 0, "Keel") and b.check(name, t_out, ref, 2 ** -24, 0, "torch")
        b.row(name, 12.0 * n, "GB/s", lambda: keel.add(ka, kb, out=ky), lambda: torch.add(ta, tb, out=ty), 0.97, chk)
        del ty

    name = "gelu (erf) f32 n=2^%d" % int(math.log2(n))
    if b.wanted(name):
        def chk(t_out):
            x = ta.double()
            ref = 0.5 * x * (1 + torch.erf(x * 0.7071067811865476))
            # an absolute term: 1 + erf(x / sqrt 2) cancels for negative x
            return b.check(name, ky_t, ref, 1e-5, 4e-6, "Keel") and b.check(name, t_out, ref, 1e-5, 4e-6, "torch")
        b.row(name, 8.0 * n, "GB/s", lambda: keel.gelu(ka, out=ky), lambda: F.gelu(ta), 0.97, chk)

    name = "sum f32 n=2^%d" % int(math.log2(n))
    if b.wanted(name):
        ks_t = torch.empty(1, device=dev)
        ks = b.k(ks_t)

        def chk(t_out):
            x = ta.double()
            ref, mag = x.sum().reshape(1), x.abs().sum()
            return (b.check(name, ks_t, ref, 0, 1e-7 * mag, "Keel") and
                    b.check(name, t_out.reshape(1), ref, 0, 1e-7 * mag, "torch"))
        b.row(name, 4.0 * n, "GB/s", lambda: keel.sum(ka, out=ks), lambda: torch.sum(ta), 0.97, chk)
        del ks, ks_t

    rows = n // 4096
    name = "sum rows f32 %dx4096" % rows
    if b.wanted(name):
        t2 = ta.view(rows, 4096)
        k2 = b.k(t2)
        kr_t = torch.empty(rows, device=dev)
        kr = b.k(kr_t)

        def chk(t_out):
            x = t2.double()
            ref, mag = x.sum(1), x.abs().sum(1)
            return b.check(name, kr_t, ref, 0, 1e-6 * mag, "Keel") and b.check(name, t_out, ref, 0, 1e-6 * mag, "torch")
        b.row(name, 4.0 * n, "GB/s", lambda: keel.sum(k2, axis=-1, out=kr), lambda: torch.sum(t2, dim=1), 0.97, chk)
        del k2, kr, kr_t

    # Softmax and layer norm over a fixed 2^26 elements, 128 to 256k columns.
    total = 1 << 26
    cases = [(torch.float32, c) for c in (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)]
    cases += [(torch.bfloat16, 128), (torch.bfloat16, 4096)]
    for dt, cols in cases:
        r = total // cols
        tn = "f32" if dt == torch.float32 else "bf16"
        sm, ln = "softmax %s %dx%d" % (tn, r, cols), "layernorm %s %dx%d" % (tn, r, cols)
        if not (b.wanted(sm) or b.wanted(ln)):
            continue
        tx = ta[: r * cols].view(r, cols).to(dt)
        kx = b.k(tx)
        out_t = torch.empty(r, cols, device=dev, dtype=dt)
        ko = b.k(out_t)
        es = tx.element_size()
        bf = dt == torch.bfloat16
        xd = tx.double()
        if b.wanted(sm):
            ref = torch.softmax(xd, dim=1)
            rtol, atol = (2 ** -7, 1e-7) if bf else (1e-5, 1e-9)

            def chk(t_out, ref=ref, rtol=rtol, atol=atol, sm=sm):
                return b.check(sm, out_t, ref, rtol, atol, "Keel") and b.check(sm, t_out, ref, rtol, atol, "torch")
            b.row(sm, 2.0 * es * r * cols, "GB/s", lambda: keel.softmax(kx, out=ko), lambda: torch.softmax(tx, dim=1),
                  softmax_target(cols), chk)
            del ref
        if b.wanted(ln):
            ref = F.layer_norm(xd, (cols,), eps=1e-5)
            rtol, atol = (2 ** -7, 1e-3) if bf else (1e-4, 1e-5)

            def chk(t_out, ref=ref, rtol=rtol, atol=atol, ln=ln):
                return b.check(ln, out_t, ref, rtol, atol, "Keel") and b.check(ln, t_out, ref, rtol, atol, "torch")
            b.row(ln, 2.0 * es * r * cols, "GB/s", lambda: keel.layer_norm(kx, out=ko),
                  lambda: F.layer_norm(tx, (cols,)), 0 if bf else layernorm_target(cols), chk)
            del ref
        del tx, kx, out_t, ko, xd
    del ka, kb, ky, ta, tb, ky_t
    torch.cuda.empty_cache()

    # The dense layer: y[batch, out] = relu(x[batch, in] @ w[out, in]^T + b), bf16.
    for (outf, batch, inf, target) in ((4096, 4096, 4096, 1.1), (4096, 64, 4096, 2.5)):
        name = "dense bf16 relu(linear) %dx%dx%d" % (outf, batch, inf)
        if not b.wanted(name):
            continue
        tw, tx, tbias = randn(outf, inf, dtype=torch.bfloat16), randn(batch, inf, dtype=torch.bfloat16), \
            randn(outf, dtype=torch.bfloat16)
        ty_k = torch.empty(batch, outf, device=dev, dtype=torch.bfloat16)
        kw, kx, kbias, ky = b.k(tw), b.k(tx), b.k(tbias), b.k(ty_k)
        pre = tx.double() @ tw.double().t() + tbias.double()
        ref = torch.relu(pre)
        # f32 accumulation: far below 2^-14 of the sum of magnitudes; the
        # output rounds to bf16 (room for one ulp each way).
        mag = tx.double().abs() @ tw.double().abs().t() + tbias.double().abs()
        atol = 1.2 * 2 ** -14 * mag

        # torch may sum split-K partial products in bf16 (its default
        # allow_bf16_reduced_precision_reduction), a few ulps more: its
        # result is held to 2^-4 and 2^-10 of the magnitudes, which a wrong
        # operand or layout (off by about |ref|) still fails.
        def chk(t_out, ref=ref, atol=atol, mag=mag, name=name):
            return (b.check(name, ty_k, ref, 1.2 * 2 ** -7, atol, "Keel") and
                    b.check(name, t_out, ref, 2 ** -4, 2 ** -10 * mag, "torch"))
        b.row(name, 2.0 * outf * batch * inf, "GFLOP/s", lambda: keel.dense(kx, kw, kbias, "relu", out=ky),
              lambda: F.relu(F.linear(tx, tw, tbias)), target, chk)
        # torch's own fused form: torch._addmm_activation hands bias + ReLU
        # to cuBLASLt's epilogue in one call, the strongest thing a torch
        # user can call for this layer; Keel is held to 0.98 of it.
        fused = getattr(torch, "_addmm_activation", None)
        if fused is not None:
            fname = "dense bf16 relu vs torch fused %dx%dx%d" % (outf, batch, inf)
            b.row(fname, 2.0 * outf * batch * inf, "GFLOP/s", lambda: keel.dense(kx, kw, kbias, "relu", out=ky),
                  lambda: fused(tbias, tx, tw.t()), 0.98, chk)
        del tw, tx, tbias, ty_k, kw, kx, kbias, ky, pre, ref, mag, atol


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("filters", nargs="*", help="run only the rows whose name contains one of them")
    a = ap.parse_args()
    t_start = time.perf_counter()
    try:
        import torch
        import keel
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        seed = a.seed if a.seed is not None else int(time.time_ns() % (1 << 62))
        b = Bench(torch, keel, a.quick, a.filters)
        print("# Keel %s vs PyTorch %s on %s; ratio = torch time / Keel time; inputs: torch.randn, seed %d "
              "(--seed %d repeats them); %d alternating pairs per row" %
              (keel.version(), torch.__version__, torch.cuda.get_device_name(), seed, seed, 5 if a.quick else 15),
              flush=True)
        run(b, seed)
    except Exception:
        traceback.print_exc()
        print("torch_ops: an error stopped the benchmark", flush=True)
        return 3
    fails = 0
    print("\n# summary: name, measured [min..max of the pairs], target, verdict (ratio = torch time / Keel time)")
    for name, measured, lo, hi, target, verdict in SUMMARY:
        spread = "" if math.isnan(lo) else "[%.3f..%.3f]" % (lo, hi)
        print("%-56s %9.3f %-15s %-9s %s" % (name, measured, spread, (">= %.3g" % target) if target else "-", verdict))
        fails += verdict in ("FAIL", "WRONG")
    print("# %d row(s) failed, 0 skipped for the budget, %.0f s in all" % (fails, time.perf_counter() - t_start))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
