// Mask programs and block masks (mask.h): building and checking the tree, evaluation, exact
// block classification.
// Reference: docs/design.md, "Sink attention — semantics" ("Masks"); float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/masks.test.ts, kernels.test.ts, fuzz.test.ts.
#include "mask.h"

#include <algorithm>
#include <cstring>

#include "../core/errors.h"
#include "../core/thread_pool.h"
#include "sink_attention.h"

namespace sinkflex::attention {
namespace {

BlockState And2(BlockState a, BlockState b) {
  if (a == kBlockEmpty || b == kBlockEmpty) return kBlockEmpty;
  if (a == kBlockFull && b == kBlockFull) return kBlockFull;
  return kBlockPartial;
}

BlockState Or2(BlockState a, BlockState b) {
  if (a == kBlockFull || b == kBlockFull) return kBlockFull;
  if (a == kBlockEmpty && b == kBlockEmpty) return kBlockEmpty;
  return kBlockPartial;
}

// Fills out[0, n) with 1 on [lo, hi] (clamped) and 0 elsewhere.
void FillRange(std::uint8_t* out, std::int64_t n, std::int64_t lo, std::int64_t hi) {
  lo = std::max<std::int64_t>(lo, 0);
  hi = std::min<std::int64_t>(hi, n - 1);
  if (hi < lo) {
    std::memset(out, 0, static_cast<std::size_t>(n));
    return;
  }
  std::memset(out, 0, static_cast<std::size_t>(lo));
  std::memset(out + lo, 1, static_cast<std::size_t>(hi - lo + 1));
  std::memset(out + hi + 1, 0, static_cast<std::size_t>(n - hi - 1));
}

void MinMax(const std::int32_t* ids, std::int64_t from, std::int64_t to, std::int32_t* lo, std::int32_t* hi) {
  std::int32_t a = ids[from], b = ids[from];
  for (std::int64_t p = from + 1; p <= to; ++p) {
    a = std::min(a, ids[p]);
    b = std::max(b, ids[p]);
  }
  *lo = a;
  *hi = b;
}

std::uint64_t Fnv1a(const std::int32_t* ids, std::int64_t n) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(ids);
  for (std::int64_t i = 0; i < n * 4; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

int MaskProgram::Push(Node n) {
  if (static_cast<int>(nodes_.size()) >= kMaxNodes) {
    throw ArgumentError("mask has more than " + std::to_string(kMaxNodes) + " nodes");
  }
  if (n.depth > kMaxDepth) throw ArgumentError("mask is nested deeper than " + std::to_string(kMaxDepth) + " levels");
  nodes_.push_back(n);
  return static_cast<int>(nodes_.size()) - 1;
}

int MaskProgram::AddAll() { return Push(Node{MaskKind::kAll}); }
int MaskProgram::AddCausal() { return Push(Node{MaskKind::kCausal}); }

int MaskProgram::AddWindow(std::int64_t window) {
  if (window < 1 || window > (std::int64_t{1} << 53)) {
    throw ArgumentError("window must be an integer >= 1, got " + std::to_string(window));
  }
  Node n{MaskKind::kWindow};
  n.value = window;
  return Push(n);
}

int MaskProgram::AddPrefix(std::int64_t length) {
  if (length < 0 || length > (std::int64_t{1} << 53)) {
    throw ArgumentError("prefix must be an integer >= 0, got " + std::to_string(length));
  }
  Node n{MaskKind::kPrefix};
  n.value = length;
  return Push(n);
}

int MaskProgram::AddDocuments(const std::int32_t* ids, std::int64_t idsStride, std::int64_t batch) {
  if (ids == nullptr || idsStride < 1 || batch < 1)
    throw ArgumentError("documents needs ids, a positive stride and batch");
  Node n{MaskKind::kDocuments};
  n.ids = ids;
  n.idsStride = idsStride;
  n.idsBatch = batch;
  usesDocuments_ = true;
  return Push(n);
}

int MaskProgram::AddGroup(MaskKind kind, const std::vector<int>& children) {
  if (children.empty())
    throw ArgumentError(std::string(kind == MaskKind::kAnd ? "and" : "or") + " needs at least one mask");
  Node n{kind};
  n.first = static_cast<int>(kids_.size());
  n.count = static_cast<int>(children.size());
  for (int c : children) {
    if (c < 0 || c >= static_cast<int>(nodes_.size())) throw ArgumentError("mask child index out of range");
    n.depth = std::max(n.depth, nodes_[c].depth + 1);
  }
  const int id = Push(n);
  kids_.insert(kids_.end(), children.begin(), children.end());
  return id;
}

int MaskProgram::AddAnd(const std::vector<int>& children) { return AddGroup(MaskKind::kAnd, children); }
int MaskProgram::AddOr(const std::vector<int>& children) { return AddGroup(MaskKind::kOr, children); }

int MaskProgram::AddNot(int child) {
  if (child < 0 || child >= static_cast<int>(nodes_.size())) throw ArgumentError("mask child index out of range");
  Node n{MaskKind::kNot};
  n.first = static_cast<int>(kids_.size());
  n.count = 1;
  n.depth = nodes_[child].depth + 1;
  const int id = Push(n);
  kids_.push_back(child);
  return id;
}

void MaskProgram::SetRoot(int node) {
  if (node < 0 || node >= static_cast<int>(nodes_.size())) throw ArgumentError("mask root index out of range");
  root_ = node;
}

MaskProgram MaskProgram::FromStandard(const Standard& spec, std::int64_t idsStride, std::int64_t batch) {
  if (spec.window < 0) throw ArgumentError("mask.window must be >= 0, got " + std::to_string(spec.window));
  if (spec.prefix < 0) throw ArgumentError("mask.prefix must be >= 0, got " + std::to_string(spec.prefix));
  MaskProgram p;
  std::vector<int> parts;
  if (spec.causal) parts.push_back(p.AddCausal());
  if (spec.window > 0) {
    int w = p.AddWindow(spec.window);
    if (spec.prefix > 0) w = p.AddOr({w, p.AddPrefix(spec.prefix)});
    parts.push_back(w);
  }
  if (spec.documentIds != nullptr) parts.push_back(p.AddDocuments(spec.documentIds, idsStride, batch));
  if (parts.empty()) {
    p.SetRoot(p.AddAll());
  } else if (parts.size() == 1) {
    p.SetRoot(parts[0]);
  } else {
    p.SetRoot(p.AddAnd(parts));
  }
  return p;
}

const MaskProgram& MaskProgram::Causal() {
  static const MaskProgram causal = [] {
    MaskProgram p;
    p.SetRoot(p.AddCausal());
    return p;
  }();
  return causal;
}

void MaskProgram::Check(const Shape& shape) const {
  if (root_ < 0) throw ArgumentError("mask has no root");
  for (const Node& n : nodes_) {
    if (n.kind != MaskKind::kDocuments) continue;
    if (n.idsStride != shape.kvLen || n.idsBatch != shape.batch) {
      throw ArgumentError("documentIds were given for batch " + std::to_string(n.idsBatch) + " x length " +
                          std::to_string(n.idsStride) + ", but the call has batch " + std::to_string(shape.batch) +
                          " x kvLen " + std::to_string(shape.kvLen));
    }
    if (shape.qOffset + shape.qLen > shape.kvLen) {
      throw ArgumentError("documentIds need every query position inside the keys: qOffset + qLen (" +
                          std::to_string(shape.qOffset + shape.qLen) + ") > kvLen (" + std::to_string(shape.kvLen) +
                          ")");
    }
  }
}

void MaskProgram::EvalChunk(int node, bool byKey, std::int64_t b, std::int64_t i, std::int64_t j, std::int64_t n,
                            std::uint8_t* out) const {
  const Node& nd = nodes_[node];
  switch (nd.kind) {
    case MaskKind::kAll:
      std::memset(out, 1, static_cast<std::size_t>(n));
      return;
    case MaskKind::kCausal:  // j <= i
      if (byKey) {
        FillRange(out, n, 0, i - j);
      } else {
        FillRange(out, n, j - i, n);
      }
      return;
    case MaskKind::kWindow:  // |i - j| <= window - 1 (symmetric in i and j)
      if (byKey) {
        FillRange(out, n, i - nd.value + 1 - j, i + nd.value - 1 - j);
      } else {
        FillRange(out, n, j - nd.value + 1 - i, j + nd.value - 1 - i);
      }
      return;
    case MaskKind::kPrefix:  // j < length
      if (byKey) {
        FillRange(out, n, 0, nd.value - 1 - j);
      } else {
        std::memset(out, j < nd.value ? 1 : 0, static_cast<std::size_t>(n));
      }
      return;
    case MaskKind::kDocuments: {  // same document id (query positions index the same ids)
      const std::int32_t* row = nd.ids + b * nd.idsStride;
      const std::int32_t fixed = byKey ? row[i] : row[j];
      const std::int32_t* run = byKey ? row + j : row + i;
      for (std::int64_t c = 0; c < n; ++c) out[c] = run[c] == fixed;
      return;
    }
    case MaskKind::kNot:
      EvalChunk(kids_[nd.first], byKey, b, i, j, n, out);
      for (std::int64_t c = 0; c < n; ++c) out[c] ^= 1;
      return;
    case MaskKind::kAnd:
    case MaskKind::kOr: {
      EvalChunk(kids_[nd.first], byKey, b, i, j, n, out);
      std::uint8_t tmp[kChunk];
      for (int k = 1; k < nd.count; ++k) {
        EvalChunk(kids_[nd.first + k], byKey, b, i, j, n, tmp);
        if (nd.kind == MaskKind::kAnd) {
          for (std::int64_t c = 0; c < n; ++c) out[c] &= tmp[c];
        } else {
          for (std::int64_t c = 0; c < n; ++c) out[c] |= tmp[c];
        }
      }
      return;
    }
  }
}

void MaskProgram::EvalRow(std::int64_t b, std::int64_t i, std::int64_t j0, std::int64_t n, std::uint8_t* out) const {
  for (std::int64_t c = 0; c < n; c += kChunk) EvalChunk(root_, true, b, i, j0 + c, std::min(kChunk, n - c), out + c);
}

void MaskProgram::EvalColumn(std::int64_t b, std::int64_t j, std::int64_t i0, std::int64_t n, std::uint8_t* out) const {
  for (std::int64_t c = 0; c < n; c += kChunk) EvalChunk(root_, false, b, i0 + c, j, std::min(kChunk, n - c), out + c);
}

bool MaskProgram::Allowed(std::int64_t b, std::int64_t i, std::int64_t j) const {
  std::uint8_t v;
  EvalChunk(root_, true, b, i, j, 1, &v);
  return v != 0;
}

BlockState MaskProgram::Interval(int node, std::int64_t b, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                                 std::int64_t j1) const {
  const Node& nd = nodes_[node];
  switch (nd.kind) {
    case MaskKind::kAll:
      return kBlockFull;
    case MaskKind::kCausal:
      if (j1 <= i0) return kBlockFull;
      if (j0 > i1) return kBlockEmpty;
      return kBlockPartial;
    case MaskKind::kWindow: {
      const std::int64_t dmax = std::max(i1 - j0, j1 - i0);
      const std::int64_t dmin = j0 > i1 ? j0 - i1 : (i0 > j1 ? i0 - j1 : 0);
      if (dmax <= nd.value - 1) return kBlockFull;
      if (dmin > nd.value - 1) return kBlockEmpty;
      return kBlockPartial;
    }
    case MaskKind::kPrefix:
      if (j1 < nd.value) return kBlockFull;
      if (j0 >= nd.value) return kBlockEmpty;
      return kBlockPartial;
    case MaskKind::kDocuments: {
      const std::int32_t* row = nd.ids + b * nd.idsStride;
      std::int32_t qlo, qhi, klo, khi;
      MinMax(row, i0, i1, &qlo, &qhi);
      MinMax(row, j0, j1, &klo, &khi);
      if (qlo == qhi && klo == khi && qlo == klo) return kBlockFull;
      if (qhi < klo || khi < qlo) return kBlockEmpty;
      return kBlockPartial;
    }
    case MaskKind::kNot: {
      const BlockState s = Interval(kids_[nd.first], b, i0, i1, j0, j1);
      return s == kBlockFull ? kBlockEmpty : (s == kBlockEmpty ? kBlockFull : kBlockPartial);
    }
    case MaskKind::kAnd:
    case MaskKind::kOr: {
      BlockState s = Interval(kids_[nd.first], b, i0, i1, j0, j1);
      for (int k = 1; k < nd.count; ++k) {
        const BlockState t = Interval(kids_[nd.first + k], b, i0, i1, j0, j1);
        s = nd.kind == MaskKind::kAnd ? And2(s, t) : Or2(s, t);
      }
      return s;
    }
  }
  return kBlockPartial;
}

BlockState MaskProgram::Classify(std::int64_t b, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                                 std::int64_t j1) const {
  const BlockState s = Interval(root_, b, i0, i1, j0, j1);
  if (s != kBlockPartial) return s;
  // Inconclusive: count the visible pairs exactly.
  const std::int64_t n = j1 - j0 + 1;
  std::uint8_t row[kChunk];
  std::int64_t visible = 0;
  for (std::int64_t i = i0; i <= i1; ++i) {
    for (std::int64_t c = 0; c < n; c += kChunk) {
      const std::int64_t m = std::min(kChunk, n - c);
      EvalChunk(root_, true, b, i, j0 + c, m, row);
      for (std::int64_t x = 0; x < m; ++x) visible += row[x];
    }
  }
  if (visible == 0) return kBlockEmpty;
  if (visible == n * (i1 - i0 + 1)) return kBlockFull;
  return kBlockPartial;
}

void MaskProgram::Describe(int node, std::string* s) const {
  const Node& nd = nodes_[node];
  switch (nd.kind) {
    case MaskKind::kAll:
      *s += "all";
      return;
    case MaskKind::kCausal:
      *s += "causal";
      return;
    case MaskKind::kWindow:
      *s += "window(" + std::to_string(nd.value) + ")";
      return;
    case MaskKind::kPrefix:
      *s += "prefix(" + std::to_string(nd.value) + ")";
      return;
    case MaskKind::kDocuments:
      *s += "documents(" + std::to_string(nd.idsBatch) + "x" + std::to_string(nd.idsStride) + ":" +
            std::to_string(Fnv1a(nd.ids, nd.idsBatch * nd.idsStride)) + ")";
      return;
    case MaskKind::kNot:
    case MaskKind::kAnd:
    case MaskKind::kOr:
      *s += nd.kind == MaskKind::kNot ? "not(" : (nd.kind == MaskKind::kAnd ? "and(" : "or(");
      for (int k = 0; k < nd.count; ++k) {
        if (k) *s += ",";
        Describe(kids_[nd.first + k], s);
      }
      *s += ")";
      return;
  }
}

void MaskProgram::EmitPostfix(int node, std::vector<PostfixOp>* out) const {
  const Node& nd = nodes_[node];
  PostfixOp op;
  op.kind = nd.kind;
  switch (nd.kind) {
    case MaskKind::kNot:
      EmitPostfix(kids_[nd.first], out);
      out->push_back(op);
      return;
    case MaskKind::kAnd:
    case MaskKind::kOr:
      EmitPostfix(kids_[nd.first], out);
      for (int k = 1; k < nd.count; ++k) {
        EmitPostfix(kids_[nd.first + k], out);
        out->push_back(op);
      }
      return;
    default:
      op.value = nd.value;
      op.ids = nd.ids;
      op.idsStride = nd.idsStride;
      op.idsBatch = nd.idsBatch;
      out->push_back(op);
      return;
  }
}

std::vector<MaskProgram::PostfixOp> MaskProgram::Postfix() const {
  if (root_ < 0) throw ArgumentError("mask has no root");
  std::vector<PostfixOp> out;
  EmitPostfix(root_, &out);
  return out;
}

std::string MaskProgram::Signature() const {
  std::string s;
  if (root_ >= 0) Describe(root_, &s);
  return s;
}

BlockMask BlockMask::Build(const MaskProgram& mask, const Shape& shape, std::int64_t blockSize) {
  if (blockSize < kMinBlock || blockSize > kMaxBlock || blockSize % 16 != 0) {
    throw ArgumentError("blockSize must be a multiple of 16 in [16, 256], got " + std::to_string(blockSize));
  }
  ValidateShape(shape);
  mask.Check(shape);
  BlockMask bm;
  bm.batch_ = mask.UsesDocuments() ? shape.batch : 1;
  bm.blockSize_ = blockSize;
  bm.qLen_ = shape.qLen;
  bm.kvLen_ = shape.kvLen;
  bm.qOffset_ = shape.qOffset;
  bm.qBlocks_ = (shape.qLen + blockSize - 1) / blockSize;
  bm.kvBlocks_ = (shape.kvLen + blockSize - 1) / blockSize;
  const std::int64_t rows = bm.batch_ * bm.qBlocks_;
  bm.states_ = HostBuffer<std::uint8_t>(static_cast<std::size_t>(rows * bm.kvBlocks_), "attention block mask");
  std::uint8_t* st = bm.states_.data();
  const std::int64_t nk = bm.kvBlocks_;
  ThreadPool::Global().ParallelFor(rows, [&](std::int64_t row, int) {
    const std::int64_t entry = row / bm.qBlocks_, qb = row % bm.qBlocks_;
    const std::int64_t i0 = shape.qOffset + qb * blockSize;
    const std::int64_t i1 = shape.qOffset + std::min((qb + 1) * blockSize, shape.qLen) - 1;
    for (std::int64_t kb = 0; kb < nk; ++kb) {
      const std::int64_t j0 = kb * blockSize, j1 = std::min((kb + 1) * blockSize, shape.kvLen) - 1;
      st[row * nk + kb] = mask.Classify(entry, i0, i1, j0, j1);
    }
  });
  // Lists of non-empty pairs in both directions.
  bm.kvPtr_ = HostBuffer<std::int64_t>(static_cast<std::size_t>(rows + 1), "attention block mask");
  bm.qPtr_ = HostBuffer<std::int64_t>(static_cast<std::size_t>(bm.batch_ * nk + 1), "attention block mask");
  std::int64_t nonEmpty = 0;
  bm.kvPtr_[0] = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::int64_t kb = 0; kb < nk; ++kb) {
      const std::uint8_t s = st[row * nk + kb];
      ++bm.counts_[s];
      nonEmpty += s != kBlockEmpty;
    }
    bm.kvPtr_[row + 1] = nonEmpty;
  }
  bm.kvIdx_ =
      HostBuffer<std::int32_t>(static_cast<std::size_t>(std::max<std::int64_t>(nonEmpty, 1)), "attention block mask");
  bm.qIdx_ =
      HostBuffer<std::int32_t>(static_cast<std::size_t>(std::max<std::int64_t>(nonEmpty, 1)), "attention block mask");
  std::int64_t w = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::int64_t kb = 0; kb < nk; ++kb) {
      if (st[row * nk + kb] != kBlockEmpty) bm.kvIdx_[w++] = static_cast<std::int32_t>(kb);
    }
  }
  w = 0;
  bm.qPtr_[0] = 0;
  for (std::int64_t e = 0; e < bm.batch_; ++e) {
    for (std::int64_t kb = 0; kb < nk; ++kb) {
      for (std::int64_t qb = 0; qb < bm.qBlocks_; ++qb) {
        if (st[(e * bm.qBlocks_ + qb) * nk + kb] != kBlockEmpty) bm.qIdx_[w++] = static_cast<std::int32_t>(qb);
      }
      bm.qPtr_[e * nk + kb + 1] = w;
    }
  }
  return bm;
}

void BlockMask::CheckFits(const Shape& shape, const std::string& what) const {
  if (shape.qLen != qLen_ || shape.kvLen != kvLen_ || shape.qOffset != qOffset_ ||
      (batch_ != 1 && batch_ != shape.batch)) {
    throw ArgumentError(
        what + " was built for seqLen " + std::to_string(qLen_) +
        (kvLen_ != qLen_ || qOffset_ != 0
             ? " (kvLen " + std::to_string(kvLen_) + ", queryOffset " + std::to_string(qOffset_) + ")"
             : std::string()) +
        (batch_ != 1 ? " and batch " + std::to_string(batch_) : std::string()) + ", but the call has seqLen " +
        std::to_string(shape.qLen) +
        (shape.kvLen != shape.qLen || shape.qOffset != 0
             ? " (kvLen " + std::to_string(shape.kvLen) + ", queryOffset " + std::to_string(shape.qOffset) + ")"
             : std::string()) +
        " and batch " + std::to_string(shape.batch));
  }
}

std::int64_t DenseMaskSize(const MaskProgram& mask, const Shape& shape) {
  return (mask.UsesDocuments() ? shape.batch : 1) * shape.qLen * shape.kvLen;
}

void DenseMask(const MaskProgram& mask, const Shape& shape, std::uint8_t* out) {
  mask.Check(shape);
  const std::int64_t entries = mask.UsesDocuments() ? shape.batch : 1;
  ThreadPool::Global().ParallelFor(entries * shape.qLen, [&](std::int64_t row, int) {
    const std::int64_t b = row / shape.qLen, i = row % shape.qLen;
    mask.EvalRow(b, shape.qOffset + i, 0, shape.kvLen, out + row * shape.kvLen);
  });
}

}  // namespace sinkflex::attention
