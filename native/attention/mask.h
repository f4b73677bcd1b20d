// Reference: docs/design.md, "Sink attention — semantics" ("Masks"); float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/masks.test.ts, kernels.test.ts, fuzz.test.ts.
// Attention masks for sink attention: predicate trees over (batch, query position, key
// position) that compose like FlexAttention's mask_mods, and block masks that classify every
// (query block, key block) pair once as empty, partial or full.
//
// Semantics (docs/design.md, "Sink attention — semantics"): for query position i and key position j
//   causal            j <= i
//   window(W), W >= 1 |i - j| <= W - 1   (with causal: the W keys i-W+1 .. i)
//   prefix(P), P >= 0 j < P              (attention-sink tokens)
//   documents(ids)    ids[b, i] == ids[b, j]   (packed sequences)
//   all               always true
// and/or/not combine them. Positions are absolute: query row r of a call sits at position
// qOffset + r, key row j at position j.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../core/allocator.h"

namespace sinkflex::attention {

struct Shape;  // sink_attention.h

enum class MaskKind : std::uint8_t { kAll, kCausal, kWindow, kPrefix, kDocuments, kAnd, kOr, kNot };

/** Result of classifying a rectangle of (query, key) pairs. */
enum BlockState : std::uint8_t { kBlockEmpty = 0, kBlockPartial = 1, kBlockFull = 2 };

/**
 * A mask predicate tree. Build nodes bottom-up with the Add* functions (each returns the new
 * node's index), then SetRoot. Documents leaves point at caller-owned ids laid out
 * [batch][idsStride] (idsStride = the key length), which must outlive the program.
 * Evaluation is thread-safe.
 */
class MaskProgram {
 public:
  static constexpr int kMaxNodes = 4096;
  static constexpr int kMaxDepth = 32;

  int AddAll();
  int AddCausal();
  /** W >= 1 keys: |i - j| <= W - 1. */
  int AddWindow(std::int64_t window);
  /** Keys j < P (P >= 0). */
  int AddPrefix(std::int64_t length);
  /** doc[b, i] == doc[b, j]; ids has batch * idsStride entries. */
  int AddDocuments(const std::int32_t* ids, std::int64_t idsStride, std::int64_t batch);
  int AddAnd(const std::vector<int>& children);
  int AddOr(const std::vector<int>& children);
  int AddNot(int child);
  void SetRoot(int node);

  /** The shorthand of the JS API: causal AND (window OR prefix) AND documents. */
  struct Standard {
    bool causal = true;
    std::int64_t window = 0;                    // 0 = none
    std::int64_t prefix = 0;                    // 0 = none; only matters with a window
    const std::int32_t* documentIds = nullptr;  // [batch][kvLen] or nullptr
  };
  /** Builds the tree of a Standard mask (idsStride/batch describe documentIds). */
  static MaskProgram FromStandard(const Standard& spec, std::int64_t idsStride, std::int64_t batch);
  /** The default mask: causal. */
  static const MaskProgram& Causal();

  int root() const { return root_; }
  bool empty() const { return root_ < 0; }
  /** True when a documents leaf makes the mask depend on the batch index. */
  bool UsesDocuments() const { return usesDocuments_; }
  /** Throws ArgumentError unless the program is complete and fits `shape` (documents ids length). */
  void Check(const Shape& shape) const;

  /** Is key j visible to query i (absolute positions) in batch b? */
  bool Allowed(std::int64_t b, std::int64_t i, std::int64_t j) const;
  /** out[c] = Allowed(b, i, j0 + c) for c in [0, n), as 0/1 bytes. */
  void EvalRow(std::int64_t b, std::int64_t i, std::int64_t j0, std::int64_t n, std::uint8_t* out) const;
  /** out[c] = Allowed(b, i0 + c, j) for c in [0, n), as 0/1 bytes (one key, a run of queries). */
  void EvalColumn(std::int64_t b, std::int64_t j, std::int64_t i0, std::int64_t n, std::uint8_t* out) const;
  /**
   * Classifies the rectangle of queries [i0, i1] x keys [j0, j1] (inclusive, absolute) exactly:
   * an interval analysis first, refined row by row where it is inconclusive.
   */
  BlockState Classify(std::int64_t b, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) const;
  /** A canonical description (documents leaves by length and content hash), to compare masks. */
  std::string Signature() const;

  /**
   * One step of the mask in postfix order, for evaluators outside this class (the CUDA
   * kernels): a leaf pushes its predicate, kAnd / kOr pop two values and push their
   * combination, kNot negates the top. The stack never holds more than kMaxDepth values.
   */
  struct PostfixOp {
    MaskKind kind = MaskKind::kAll;
    std::int64_t value = 0;             // window or prefix
    const std::int32_t* ids = nullptr;  // documents: [batch][idsStride]
    std::int64_t idsStride = 0;
    std::int64_t idsBatch = 0;
  };
  /** The program from the root in postfix order (n-ary and/or become chains of binary ones). */
  std::vector<PostfixOp> Postfix() const;

 private:
  struct Node {
    MaskKind kind = MaskKind::kAll;
    std::int64_t value = 0;  // window or prefix
    const std::int32_t* ids = nullptr;
    std::int64_t idsStride = 0, idsBatch = 0;
    int first = 0, count = 0;  // children in kids_
    int depth = 1;
  };
  static constexpr std::int64_t kChunk = 256;

  int Push(Node n);
  int AddGroup(MaskKind kind, const std::vector<int>& children);
  // out[c] = Allowed(b, i, j + c) (byKey) or Allowed(b, i + c, j) (by query), c in [0, n <= kChunk).
  void EvalChunk(int node, bool byKey, std::int64_t b, std::int64_t i, std::int64_t j, std::int64_t n,
                 std::uint8_t* out) const;
  BlockState Interval(int node, std::int64_t b, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                      std::int64_t j1) const;
  void Describe(int node, std::string* s) const;
  void EmitPostfix(int node, std::vector<PostfixOp>* out) const;

  std::vector<Node> nodes_;
  std::vector<int> kids_;
  int root_ = -1;
  bool usesDocuments_ = false;
};

/**
 * Block-level view of a mask for one shape: the state of every (query block, key block) pair,
 * and for each query block the ascending list of non-empty key blocks (forward, dq) and for
 * each key block the ascending list of non-empty query blocks (dk/dv). Blocks are `blockSize`
 * rows of the call (query block qb covers rows [qb*bs, min((qb+1)*bs, qLen)) ). One per batch
 * entry when the mask uses documents, else one shared by the whole batch.
 */
class BlockMask {
 public:
  static constexpr std::int64_t kMinBlock = 16;
  static constexpr std::int64_t kMaxBlock = 256;

  /** Classifies every pair (in parallel on the thread pool). blockSize: multiple of 16 in [16, 256]. */
  static BlockMask Build(const MaskProgram& mask, const Shape& shape, std::int64_t blockSize);

  std::int64_t batch() const { return batch_; }
  std::int64_t blockSize() const { return blockSize_; }
  std::int64_t qBlocks() const { return qBlocks_; }
  std::int64_t kvBlocks() const { return kvBlocks_; }
  std::int64_t qLen() const { return qLen_; }
  std::int64_t kvLen() const { return kvLen_; }
  std::int64_t qOffset() const { return qOffset_; }
  /** Number of pairs in each state (summed over the stored batch entries). */
  std::int64_t count(BlockState s) const { return counts_[s]; }
  /** Batch entry of the stored states for call batch index b. */
  std::int64_t Entry(std::int64_t b) const { return batch_ == 1 ? 0 : b; }
  BlockState State(std::int64_t entry, std::int64_t qb, std::int64_t kb) const {
    return static_cast<BlockState>(states_[(entry * qBlocks_ + qb) * kvBlocks_ + kb]);
  }
  /** All states, [batch()][qBlocks()][kvBlocks()]. */
  const std::uint8_t* states() const { return states_.data(); }
  /** Non-empty key blocks of query block qb, ascending. */
  const std::int32_t* KvList(std::int64_t entry, std::int64_t qb, std::int64_t* n) const {
    const std::int64_t row = entry * qBlocks_ + qb;
    *n = kvPtr_[row + 1] - kvPtr_[row];
    return kvIdx_.data() + kvPtr_[row];
  }
  /** Non-empty query blocks of key block kb, ascending. */
  const std::int32_t* QList(std::int64_t entry, std::int64_t kb, std::int64_t* n) const {
    const std::int64_t row = entry * kvBlocks_ + kb;
    *n = qPtr_[row + 1] - qPtr_[row];
    return qIdx_.data() + qPtr_[row];
  }
  /** Throws ArgumentError (naming `what`) unless this block mask was built for `shape`'s sizes. */
  void CheckFits(const Shape& shape, const std::string& what) const;

 private:
  std::int64_t batch_ = 1, blockSize_ = 64, qBlocks_ = 0, kvBlocks_ = 0, qLen_ = 0, kvLen_ = 0, qOffset_ = 0;
  std::int64_t counts_[3] = {0, 0, 0};
  HostBuffer<std::uint8_t> states_;
  HostBuffer<std::int64_t> kvPtr_, qPtr_;
  HostBuffer<std::int32_t> kvIdx_, qIdx_;
};

/** Writes the dense mask, [documents ? batch : 1][qLen][kvLen] bytes (1 = visible). */
void DenseMask(const MaskProgram& mask, const Shape& shape, std::uint8_t* out);
/** Entries of the dense mask: (documents ? batch : 1) * qLen * kvLen. */
std::int64_t DenseMaskSize(const MaskProgram& mask, const Shape& shape);

}  // namespace sinkflex::attention
