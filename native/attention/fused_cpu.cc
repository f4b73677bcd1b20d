// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// Fused (FlashAttention-2 style) sink attention on the CPU: the drivers that validate, plan
// the tiles and run the ISA kernels (kernels_impl.h) on the thread pool.
//
// Keys and values are read in place: tiles are key-major (fused_impl.h), so every tile product
// takes K and V rows as they are and only the query side is copied, into per-thread scratch.
// Extra memory: the per-thread scratch, one float per query row (D), and for kGroups with
// several slots the dk/dv partials.
// Forward: one task per (query block, batch, head); a task keeps its running max m, sum l and
// output accumulator for the block's rows while it walks the non-empty key blocks.
// Backward: a pre-pass computes D_i = dO_i.o_i - dLse_i and dsink; then either (kBlocks) one
// pass over (key block, batch, kv head) accumulating dk and dv over every query head of the
// group and every non-empty query block plus one pass over (query block, batch, head)
// accumulating dq, or (kGroups) one pass per (batch, kv head) doing all three, the group's
// query heads split over a few tasks with kv-sized dk/dv partials when there are fewer
// (batch, kv head) pairs than threads.
// Each output element is written by exactly one task: no atomics, no races, and results do
// not depend on the number of threads. Tasks run heaviest first.
#include <algorithm>
#include <cmath>

#include "../core/thread_pool.h"
#include "kernels.h"
#include "sink_attention.h"

namespace sinkflex::attention {
namespace {

std::int64_t RoundUp(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

// A permutation of [0, n) ordered by decreasing work(t) (stable).
template <typename Work>
HostBuffer<std::int64_t> HeavyFirst(std::int64_t n, Work work) {
  HostBuffer<std::int64_t> order(static_cast<std::size_t>(n), "fused attention task order");
  HostBuffer<std::int64_t> key(static_cast<std::size_t>(n), "fused attention task order");
  for (std::int64_t t = 0; t < n; ++t) {
    order[t] = t;
    key[t] = work(t);
  }
  std::stable_sort(order.data(), order.data() + n, [&](std::int64_t a, std::int64_t b) { return key[a] > key[b]; });
  return order;
}

struct Plan {
  Resolved r;
  const KernelTable* kt;
  BlockMask local;
  const BlockMask* blocks;
  FusedCtx ctx;
};

void MakePlan(const Shape& shape, const Options& opts, Plan* p) {
  p->r = Resolve(shape, opts);
  p->kt = &KernelsFor(opts.isa);
  if (opts.blockMask != nullptr) {
    opts.blockMask->CheckFits(shape, "blockMask");
    p->blocks = opts.blockMask;
  } else {
    p->local = BlockMask::Build(*p->r.mask, shape, opts.blockSize);
    p->blocks = &p->local;
  }
  FusedCtx& c = p->ctx;
  c.shape = shape;
  c.scale = p->r.scale;
  c.softcap = p->r.softcap;
  c.mask = p->r.mask;
  c.blocks = p->blocks;
  c.bs = p->blocks->blockSize();
  c.dPad = RoundUp(shape.headDim, 16);
}

// Runs `task` for t in [0, n) with a private scratch slice of `perThread` floats per thread.
template <typename Fn>
void RunTasks(std::int64_t n, std::int64_t perThread, const char* what, Fn task) {
  ThreadPool& pool = ThreadPool::Global();
  const std::int64_t stride = RoundUp(perThread, 16);
  HostBuffer<float> scratch(static_cast<std::size_t>(stride * pool.size()), what);
  pool.ParallelFor(n, [&](std::int64_t t, int thread) { task(t, scratch.data() + stride * thread); });
}

}  // namespace

void FusedForward(const Shape& shape, const Options& opts, const ForwardArgs& a) {
  RequirePtr(a.q, "q");
  RequirePtr(a.k, "k");
  RequirePtr(a.v, "v");
  RequirePtr(a.out, "out");
  RequirePtr(a.lse, "lse");
  Plan p;
  MakePlan(shape, opts, &p);
  FusedCtx& c = p.ctx;
  const BlockMask& bm = *p.blocks;
  c.q = a.q;
  c.k = a.k;
  c.v = a.v;
  c.sinks = a.sinks;
  c.out = a.out;
  c.lse = a.lse;
  const std::int64_t n = bm.qBlocks() * shape.batch * shape.qHeads;
  HostBuffer<std::int64_t> order = HeavyFirst(n, [&](std::int64_t t) {
    const std::int64_t rest = t / shape.qHeads;
    std::int64_t len = 0;
    bm.KvList(bm.Entry(rest % shape.batch), rest / shape.batch, &len);
    return len;
  });
  c.order = order.data();
  const KernelTable& kt = *p.kt;
  RunTasks(n, FusedForwardScratch(c.bs, c.dPad), "fused attention forward scratch",
           [&](std::int64_t t, float* scratch) { kt.fusedForwardTask(c, t, scratch); });
}

void FusedBackward(const Shape& shape, const Options& opts, const BackwardArgs& a) {
  RequirePtr(a.q, "q");
  RequirePtr(a.k, "k");
  RequirePtr(a.v, "v");
  RequirePtr(a.out, "out");
  RequirePtr(a.lse, "lse");
  RequirePtr(a.dOut, "dOut");
  RequirePtr(a.dq, "dq");
  RequirePtr(a.dk, "dk");
  RequirePtr(a.dv, "dv");
  Plan p;
  MakePlan(shape, opts, &p);
  FusedCtx& c = p.ctx;
  const KernelTable& kt = *p.kt;
  const std::int64_t B = shape.batch, Hq = shape.qHeads, T = shape.qLen, D = shape.headDim;

  // D_i = dO_i . o_i - dLse_i, and each (batch, head)'s share of dsink.
  HostBuffer<float> delta(static_cast<std::size_t>(shape.lseElems()), "fused attention backward D");
  HostBuffer<double> sinkPart(static_cast<std::size_t>(B * Hq), "fused attention backward dsink");
  ThreadPool::Global().ParallelFor(B * Hq, [&](std::int64_t bh, int) {
    const std::int64_t b = bh / Hq, h = bh % Hq;
    const float sink = a.sinks ? a.sinks[h] : -INFINITY;
    double part = 0.0;
    for (std::int64_t i = 0; i < T; ++i) {
      const std::int64_t off = ((b * T + i) * Hq + h) * D;
      float d = kt.dot(a.dOut + off, a.out + off, D);
      if (a.dLse) d -= a.dLse[bh * T + i];
      delta[bh * T + i] = d;
      const float L = a.lse[bh * T + i];
      if (sink > -INFINITY && L > -INFINITY) part += std::exp(static_cast<double>(sink) - L) * d;
    }
    sinkPart[bh] = part;
  });
  if (a.sinks && a.dSinks) {
    for (std::int64_t h = 0; h < Hq; ++h) {
      double s = 0.0;
      for (std::int64_t b = 0; b < B; ++b) s += sinkPart[b * Hq + h];
      a.dSinks[h] = static_cast<float>(-s);
    }
  }

  const BlockMask& bm = *p.blocks;
  c.q = a.q;
  c.k = a.k;
  c.v = a.v;
  c.sinks = a.sinks;
  c.lseIn = a.lse;
  c.dOut = a.dOut;
  c.delta = delta.data();
  c.dq = a.dq;
  c.dk = a.dk;
  c.dv = a.dv;
  const std::int64_t per = FusedBackwardScratch(c.bs, c.dPad);

  // One pass per (batch, kv head) does the least work; the query heads of a group are split
  // over `slots` tasks (each with kv-sized dk/dv partials) until there are kSplitTasks tasks.
  // The split (which fixes the order of the dk/dv sums) depends on the shape only: the same
  // bits whatever the thread count.
  const std::int64_t Hkv = shape.kvHeads;
  const std::int64_t slots =
      std::min(shape.group(), std::max<std::int64_t>(1, (kSplitTasks + B * Hkv - 1) / (B * Hkv)));
  BackwardSplit split = opts.backwardSplit;
  if (split == BackwardSplit::kAuto)
    split = B * Hkv * slots >= kSplitTasks ? BackwardSplit::kGroups : BackwardSplit::kBlocks;
  if (split == BackwardSplit::kGroups) {
    const std::int64_t kvn = shape.kvElems();
    HostBuffer<float> dkPart(static_cast<std::size_t>((slots - 1) * kvn), "fused attention backward dk partials");
    HostBuffer<float> dvPart(static_cast<std::size_t>((slots - 1) * kvn), "fused attention backward dv partials");
    std::fill(a.dk, a.dk + kvn, 0.0f);
    std::fill(a.dv, a.dv + kvn, 0.0f);
    std::fill(dkPart.data(), dkPart.data() + (slots - 1) * kvn, 0.0f);
    std::fill(dvPart.data(), dvPart.data() + (slots - 1) * kvn, 0.0f);
    c.slots = slots;
    c.dkPart = dkPart.data();
    c.dvPart = dvPart.data();
    RunTasks(B * Hkv * slots, per, "fused attention backward scratch",
             [&](std::int64_t t, float* scratch) { kt.fusedBackwardGroupTask(c, t, scratch); });
    if (slots > 1) {  // add the partials in slot order (deterministic)
      constexpr std::int64_t kChunk = 1 << 14;
      ThreadPool::Global().ParallelFor((kvn + kChunk - 1) / kChunk, [&](std::int64_t ch, int) {
        const std::int64_t lo = ch * kChunk, hi = std::min(kvn, lo + kChunk);
        for (std::int64_t sl = 1; sl < slots; ++sl) {
          const float* pk = dkPart.data() + (sl - 1) * kvn;
          const float* pv = dvPart.data() + (sl - 1) * kvn;
          for (std::int64_t i = lo; i < hi; ++i) {
            a.dk[i] += pk[i];
            a.dv[i] += pv[i];
          }
        }
      });
    }
    return;
  }

  const std::int64_t nKv = bm.kvBlocks() * B * shape.kvHeads;
  HostBuffer<std::int64_t> kvOrder = HeavyFirst(nKv, [&](std::int64_t t) {
    const std::int64_t rest = t / shape.kvHeads;
    std::int64_t len = 0;
    bm.QList(bm.Entry(rest % B), rest / B, &len);
    return len;
  });
  c.order = kvOrder.data();
  RunTasks(nKv, per, "fused attention backward scratch",
           [&](std::int64_t t, float* scratch) { kt.fusedBackwardKvTask(c, t, scratch); });
  kvOrder.reset();

  const std::int64_t nQ = bm.qBlocks() * B * Hq;
  HostBuffer<std::int64_t> qOrder = HeavyFirst(nQ, [&](std::int64_t t) {
    const std::int64_t rest = t / Hq;
    std::int64_t len = 0;
    bm.KvList(bm.Entry(rest % B), rest / B, &len);
    return len;
  });
  c.order = qOrder.data();
  RunTasks(nQ, per, "fused attention backward scratch",
           [&](std::int64_t t, float* scratch) { kt.fusedBackwardQTask(c, t, scratch); });
}

}  // namespace sinkflex::attention
