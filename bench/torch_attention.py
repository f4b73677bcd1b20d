#!/usr/bin/env python3
"""PyTorch reference timings for bench/attention-gpu.ts (run by it when torch is importable).

For each mask ('window': causal sliding window of W keys including the current one, 'full':
causal) and sequence length, at the given heads (GQA) and head dimension, batch 1, bf16:

* flex: torch.compile'd FlexAttention with a BlockMask of the mask and the per-head sink
  applied afterwards by the LSE correction  out * sigmoid(lse - sink)  (the sink enters the
  softmax denominator only); forward, then backward of (out * dOut).sum() into q, k, v, sinks;
* sdpa: torch.nn.functional.scaled_dot_product_attention(is_causal=True, enable_gqa=True),
  'full' only and without a sink (a speed reference, not the same function).

Prints a JSON list of {mask, seqLen, impl, peakBytes, forwardMs, backwardMs, note} to stdout
(progress to stderr). Times are medians of --repeats runs after one warm-up (which includes
compilation); peakBytes is torch.cuda.max_memory_allocated over one forward+backward with the
inputs allocated. Points past --budget seconds (compilation included) are skipped.
"""
import argparse
import json
import sys
import time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", default="1024,2048,4096,8192,16384,32768")
    ap.add_argument("--heads", default="64/8")
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--masks", default="window,full")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=120.0)
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    dev = torch.device("cuda")
    hq, hkv = (int(x) for x in args.heads.split("/"))
    d = args.head_dim
    W = args.window
    seqs = [int(x) for x in args.seqs.split(",")]
    masks = args.masks.split(",")
    compiled = torch.compile(flex_attention, dynamic=False)
    started = time.perf_counter()
    rows = []

    def causal(b, h, q, kv):
        return q >= kv

    def window(b, h, q, kv):
        return (q >= kv) & (q - kv < W)

    def flex_call(q, k, v, sinks, block_mask):
        try:
            from torch.nn.attention.flex_attention import AuxRequest

            out, aux = compiled(q, k, v, block_mask=block_mask, enable_gqa=True, return_aux=AuxRequest(lse=True))
            lse = aux.lse
        except (ImportError, TypeError):
            out, lse = compiled(q, k, v, block_mask=block_mask, enable_gqa=True, return_lse=True)
        return out * torch.sigmoid(lse - sinks.view(1, -1, 1)).unsqueeze(-1).to(out.dtype)

    def measure(fn):
        """(forward ms, backward ms, peak bytes) of one run of fn() -> (loss, grads tensors)."""
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        out, inputs = fn()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        grads = torch.autograd.grad(out, inputs, grad_outputs=torch.ones_like(out) * 0.5)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        peak = torch.cuda.max_memory_allocated()
        del out, grads
        return (t1 - t0) * 1e3, (t2 - t1) * 1e3, peak

    for T in seqs:
        g = torch.Generator(device=dev).manual_seed(T)
        q = torch.randn(1, hq, T, d, device=dev, dtype=torch.bfloat16, generator=g).requires_grad_()
        k = torch.randn(1, hkv, T, d, device=dev, dtype=torch.bfloat16, generator=g).requires_grad_()
        v = torch.randn(1, hkv, T, d, device=dev, dtype=torch.bfloat16, generator=g).requires_grad_()
        sinks = torch.randn(hq, device=dev, dtype=torch.float32, generator=g).requires_grad_()
        for mask in masks:
            impls = ["flex"] + (["sdpa"] if mask == "full" else [])
            for impl in impls:
                row = {"mask": mask, "seqLen": T, "impl": impl, "peakBytes": None, "forwardMs": None, "backwardMs": None}
                rows.append(row)
                if time.perf_counter() - started > args.budget:
                    row["note"] = "skipped: time budget"
                    continue
                try:
                    if impl == "flex":
                        bm = create_block_mask(window if mask == "window" else causal, None, None, T, T, device=dev)
                        fn = lambda: (flex_call(q, k, v, sinks, bm), (q, k, v, sinks))
                    else:
                        fn = lambda: (F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), (q, k, v))
                    _, _, peak = measure(fn)  # warm-up (compiles)
                    fw, bw = [], []
                    for _ in range(args.repeats):
                        if time.perf_counter() - started > args.budget:
                            break
                        a, b, peak = measure(fn)
                        fw.append(a)
                        bw.append(b)
                    if fw:
                        row["forwardMs"] = sorted(fw)[len(fw) // 2]
                        row["backwardMs"] = sorted(bw)[len(bw) // 2]
                    row["peakBytes"] = peak
                except torch.cuda.OutOfMemoryError as e:
                    row["note"] = "out of memory: " + str(e).split("\n")[0]
                    torch.cuda.empty_cache()
                except Exception as e:  # report, keep going
                    row["note"] = f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                log(f"torch {impl} {mask} {T}: {row}")
        del q, k, v, sinks
        torch.cuda.empty_cache()
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
