// Reference: docs/design.md, "GRPO — semantics" (policy loss, KL term, aggregation, gradient,
//   metrics); float64 reference: test/grpo/fixtures/reference.ts.
// Tests: test/grpo/policy-loss.test.ts, policy-loss-errors.test.ts, determinism.test.ts.
// The policy loss driver: option checks, the two parallel passes and the ordered reductions.
//
// Work decomposition (fixed by batch and responseLen, never by the thread count): each row is
// cut into pieces of at most kPieceMax tokens; a task is a run of consecutive pieces of about
// kTaskTokens tokens. Pass A counts each piece's unmasked tokens (and checks the mask is 0/1);
// the counts give the aggregation weights. Pass B runs the fused token kernel over each piece
// with its row's weight, writing dLogProbs and the piece sums; sums are added in piece order
// within a task and in task order across tasks, in double.
#include <cmath>
#include <string>
#include <vector>

#include "../core/allocator.h"
#include "../core/errors.h"
#include "grpo.h"
#include "grpo_cuda.h"
#include "loss_kernel.h"
#include "parallel.h"

namespace sinkflex::grpo {
namespace {

constexpr std::int64_t kPieceMax = 16384;
constexpr std::int64_t kTaskTokens = 32768;

struct Layout {
  std::int64_t batch, len, pieceLen, piecesPerRow, pieces, piecesPerTask, tasks;

  Layout(std::int64_t b, std::int64_t l) : batch(b), len(l) {
    pieceLen = l < kPieceMax ? l : kPieceMax;
    piecesPerRow = (l + pieceLen - 1) / pieceLen;
    pieces = b * piecesPerRow;
    piecesPerTask = kTaskTokens / pieceLen > 1 ? kTaskTokens / pieceLen : 1;
    tasks = (pieces + piecesPerTask - 1) / piecesPerTask;
  }
  std::int64_t Row(std::int64_t p) const { return p / piecesPerRow; }
  std::int64_t Begin(std::int64_t p) const { return Row(p) * len + (p % piecesPerRow) * pieceLen; }
  std::int64_t Size(std::int64_t p) const {
    const std::int64_t start = (p % piecesPerRow) * pieceLen;
    return len - start < pieceLen ? len - start : pieceLen;
  }
  std::int64_t TaskEnd(std::int64_t t) const {
    const std::int64_t e = (t + 1) * piecesPerTask;
    return e < pieces ? e : pieces;
  }
};

std::string At(const Layout& g, std::int64_t i) {
  return "[" + std::to_string(i / g.len) + ", " + std::to_string(i % g.len) + "]";
}

void RequireRange(double v, const char* name, double lo, bool loOpen, double hi, const std::string& rule) {
  const bool ok = std::isfinite(v) && (loOpen ? v > lo : v >= lo) && v <= hi;
  if (!ok) throw ArgumentError(std::string(name) + " must be " + rule + ", got " + std::to_string(v));
}

/** The first invalid mask value of piece p: throws. */
[[noreturn]] void ThrowMask(const PolicyLossInputs& in, const Layout& g, std::int64_t p) {
  const std::int64_t b = g.Begin(p);
  for (std::int64_t i = b; i < b + g.Size(p); ++i) {
    const float m = in.responseMask[i];
    if (m != 0.0f && m != 1.0f) {
      throw ArgumentError("responseMask" + At(g, i) + " is " + DescribeValue(m) + "; mask values must be 0 or 1");
    }
  }
  throw ArgumentError("responseMask has a value other than 0 or 1");  // unreachable: pass A saw one
}

/** The first non-finite input at an unmasked token of piece p: throws. */
[[noreturn]] void ThrowValue(const PolicyLossInputs& in, const Layout& g, std::int64_t p) {
  const std::int64_t b = g.Begin(p);
  const std::string why = " at an unmasked token; values must be finite where responseMask is 1";
  for (std::int64_t i = b; i < b + g.Size(p); ++i) {
    if (in.responseMask[i] == 0.0f) continue;
    auto check = [&](const float* a, const char* name, std::int64_t idx, const std::string& where) {
      if (a && !std::isfinite(a[idx]))
        throw ArgumentError(std::string(name) + where + " is " + DescribeValue(a[idx]) + why);
    };
    check(in.logProbs, "logProbs", i, At(g, i));
    check(in.oldLogProbs, "oldLogProbs", i, At(g, i));
    if (in.advantagesPerToken) {
      check(in.advantages, "advantages", i, At(g, i));
    } else {
      check(in.advantages, "advantages", i / g.len, "[" + std::to_string(i / g.len) + "]");
    }
    check(in.refLogProbs, "refLogProbs", i, At(g, i));
    check(in.entropy, "entropy", i, At(g, i));
  }
  throw ArgumentError("a non-finite value at an unmasked token");  // unreachable: pass B saw one
}

struct TaskSums {
  double pg = 0, kl = 0, ent = 0, negLogRatio = 0;
  std::int64_t clip = 0, clipLower = 0;
  std::int64_t firstBad = -1;  // first piece with an invalid value
};

}  // namespace

double AggregationDenominator(const PolicyLossOptions& o, std::int64_t tokens, std::int64_t sequences,
                              std::int64_t responseLen) {
  switch (o.aggMode) {
    case AggMode::kTokenMean:
      return o.globalTokenCount ? *o.globalTokenCount : static_cast<double>(tokens);
    case AggMode::kSeqMeanTokenSum:
    case AggMode::kSeqMeanTokenMean:
      return o.globalSeqCount ? *o.globalSeqCount : static_cast<double>(sequences);
    case AggMode::kSeqMeanTokenSumNorm:
      return o.lossScale ? *o.lossScale : static_cast<double>(responseLen);
  }
  return 0;
}

void ValidatePolicyLoss(const PolicyLossInputs& in, const PolicyLossOptions& o) {
  if (in.batch < 1) throw ArgumentError("batch must be >= 1, got " + std::to_string(in.batch));
  if (in.responseLen < 1) throw ArgumentError("responseLen must be >= 1, got " + std::to_string(in.responseLen));
  if (!in.logProbs || !in.oldLogProbs || !in.advantages || !in.responseMask) {
    throw ArgumentError("logProbs, oldLogProbs, advantages and responseMask are required");
  }
  RequireRange(o.clipLow, "clipLow", 0, false, 1, "in [0, 1]");
  RequireRange(o.clipHigh, "clipHigh", 0, false, HUGE_VAL, "a finite number >= 0");
  RequireRange(o.dualClipC, "dualClipC", 1, true, HUGE_VAL, "a finite number > 1");
  RequireRange(o.klCoef, "klCoef", 0, false, HUGE_VAL, "a finite number >= 0");
  RequireRange(o.entropyCoef, "entropyCoef", -HUGE_VAL, false, HUGE_VAL, "finite");
  if (o.lossScale) RequireRange(*o.lossScale, "lossScale", 0, true, HUGE_VAL, "a finite number > 0");
  if (o.globalTokenCount)
    RequireRange(*o.globalTokenCount, "globalTokenCount", 0, true, HUGE_VAL, "a finite number > 0");
  if (o.globalSeqCount) RequireRange(*o.globalSeqCount, "globalSeqCount", 0, true, HUGE_VAL, "a finite number > 0");
  if (o.klType != KlType::kNone && !in.refLogProbs) throw ArgumentError("klType needs refLogProbs");
  if (o.klType == KlType::kNone && o.klCoef != 0) throw ArgumentError("klCoef is not 0 but there are no refLogProbs");
  if (o.entropyCoef != 0 && !in.entropy) throw ArgumentError("entropyCoef is not 0 but there is no entropy input");
}

PolicyLossResult PolicyLoss(const PolicyLossInputs& in, const PolicyLossOptions& o, float* dLogProbs) {
  ValidatePolicyLoss(in, o);
  const Layout g(in.batch, in.responseLen);

  // Pass A: unmasked tokens per piece, and the mask check.
  HostBuffer<std::int64_t> pieceCount(static_cast<std::size_t>(g.pieces), "grpo policyLoss: token counts");
  std::vector<std::int64_t> maskBad(static_cast<std::size_t>(g.tasks), -1);
  ThreadPool::Global().ParallelFor(g.tasks, [&](std::int64_t t, int) {
    for (std::int64_t p = t * g.piecesPerTask; p < g.TaskEnd(t); ++p) {
      if (!MaskPiece(in.responseMask + g.Begin(p), g.Size(p), &pieceCount[static_cast<std::size_t>(p)])) {
        maskBad[static_cast<std::size_t>(t)] = p;
        return;
      }
    }
  });
  for (std::int64_t p : maskBad) {
    if (p >= 0) ThrowMask(in, g, p);
  }

  // Row counts, tokens and non-empty rows (exact integers: order does not matter).
  std::vector<std::int64_t> rowCount(static_cast<std::size_t>(in.batch), 0);
  std::int64_t tokens = 0, sequences = 0;
  for (std::int64_t p = 0; p < g.pieces; ++p)
    rowCount[static_cast<std::size_t>(g.Row(p))] += pieceCount[static_cast<std::size_t>(p)];
  for (std::int64_t c : rowCount) {
    tokens += c;
    sequences += c > 0 ? 1 : 0;
  }

  // Aggregation: loss = G * sum_i w_i * sum_t m l (docs/design.md, "GRPO — semantics", "Aggregation").
  const double denom = AggregationDenominator(o, tokens, sequences, in.responseLen);
  const double G = denom > 0 ? 1.0 / denom : 0.0;  // nothing unmasked: loss 0, gradient 0
  auto rowWeight = [&](std::int64_t row) {
    return o.aggMode == AggMode::kSeqMeanTokenMean
               ? G / (static_cast<double>(rowCount[static_cast<std::size_t>(row)]) + 1e-8)
               : G;
  };

  // Pass B: the fused token kernel.
  const TokenConsts consts{static_cast<float>(1.0 - o.clipLow), static_cast<float>(1.0 + o.clipHigh),
                           static_cast<float>(o.dualClipC), static_cast<float>(o.klCoef)};
  std::vector<TaskSums> parts(static_cast<std::size_t>(g.tasks));
  ThreadPool::Global().ParallelFor(g.tasks, [&](std::int64_t t, int) {
    TaskSums& ts = parts[static_cast<std::size_t>(t)];
    for (std::int64_t p = t * g.piecesPerTask; p < g.TaskEnd(t); ++p) {
      const std::int64_t b = g.Begin(p);
      const std::int64_t row = g.Row(p);
      const double w = rowWeight(row);
      PieceArgs a{};
      a.logp = in.logProbs + b;
      a.old = in.oldLogProbs + b;
      a.adv = in.advantagesPerToken ? in.advantages + b : nullptr;
      a.advRow = in.advantagesPerToken ? 0.0f : in.advantages[row];
      a.mask = in.responseMask + b;
      a.ref = in.refLogProbs ? in.refLogProbs + b : nullptr;
      a.ent = in.entropy ? in.entropy + b : nullptr;
      a.grad = dLogProbs + b;
      a.n = g.Size(p);
      a.w = static_cast<float>(w);
      const PieceSums s = LossPiece(a, consts, o.klType);
      if (s.bad) {
        ts.firstBad = p;
        return;
      }
      ts.pg += w * s.pg;
      ts.kl += w * s.kl;
      ts.ent += w * s.ent;
      ts.negLogRatio += s.negLogRatio;
      ts.clip += s.clip;
      ts.clipLower += s.clipLower;
    }
  });

  PolicyLossResult r;
  double clip = 0, clipLower = 0;
  for (const TaskSums& ts : parts) {
    if (ts.firstBad >= 0) ThrowValue(in, g, ts.firstBad);
    r.pgLoss += ts.pg;
    r.klLoss += ts.kl;
    r.entropy += ts.ent;
    r.ppoKl += ts.negLogRatio;
    clip += static_cast<double>(ts.clip);
    clipLower += static_cast<double>(ts.clipLower);
  }
  FinishPolicyLoss(r, clip, clipLower, tokens, sequences, o);
  return r;
}

void FinishPolicyLoss(PolicyLossResult& r, double clip, double clipLower, std::int64_t tokens, std::int64_t sequences,
                      const PolicyLossOptions& o) {
  const double perToken = tokens > 0 ? 1.0 / static_cast<double>(tokens) : 0.0;
  r.ppoKl *= perToken;
  r.pgClipfrac = clip * perToken;
  r.pgClipfracLower = clipLower * perToken;
  r.loss = r.pgLoss + o.klCoef * r.klLoss - o.entropyCoef * r.entropy;
  r.tokens = tokens;
  r.sequences = sequences;
}

}  // namespace sinkflex::grpo
