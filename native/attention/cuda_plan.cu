// Reference: docs/design.md, "Sink attention — semantics"; checked against the CPU kernels and the
//   float64 reference test/attention/fixtures/reference.ts.
// Tests: test/attention/cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// Host side of the CUDA sink attention: the per-call plan (mask program and 64-tile
// classification uploaded to the device) and a shared-memory check.
#include <algorithm>
#include <string>

#include "../core/errors.h"
#include "cuda_common.cuh"
#include "kernels.h"

namespace sinkflex::attention::cuda {
namespace {

DevMaskKind KindOf(MaskKind k) {
  switch (k) {
    case MaskKind::kAll:
      return kOpAll;
    case MaskKind::kCausal:
      return kOpCausal;
    case MaskKind::kWindow:
      return kOpWindow;
    case MaskKind::kPrefix:
      return kOpPrefix;
    case MaskKind::kDocuments:
      return kOpDocuments;
    case MaskKind::kAnd:
      return kOpAnd;
    case MaskKind::kOr:
      return kOpOr;
    case MaskKind::kNot:
      return kOpNot;
  }
  return kOpAll;
}

// Combined state of the blocks of `bm` that a 64-tile overlaps: all empty -> empty, all full
// -> full, anything else -> partial.
BlockState Combine(const BlockMask& bm, std::int64_t entry, std::int64_t r0, std::int64_t r1, std::int64_t c0,
                   std::int64_t c1) {
  const std::int64_t bs = bm.blockSize();
  const BlockState first = bm.State(entry, r0 / bs, c0 / bs);
  for (std::int64_t qb = r0 / bs; qb <= r1 / bs; ++qb) {
    for (std::int64_t kb = c0 / bs; kb <= c1 / bs; ++kb) {
      if (bm.State(entry, qb, kb) != first) return kBlockPartial;
    }
  }
  return first;
}

template <typename T>
DeviceBuffer<T> Upload(int device, const std::vector<T>& host, const char* what) {
  DeviceBuffer<T> buf(device, std::max<std::size_t>(host.size(), 1), what);
  if (!host.empty()) CopyToDevice(device, buf.data(), host.data(), host.size() * sizeof(T));
  return buf;
}

}  // namespace

DevicePlan::DevicePlan(int device, const Shape& s, const Options& opts, bool withTiles) {
  const Resolved r = Resolve(s, opts);
  AttnParams& p = params_;
  p.B = s.batch;
  p.T = s.qLen;
  p.Tk = s.kvLen;
  p.Hq = s.qHeads;
  p.Hkv = s.kvHeads;
  p.D = s.headDim;
  p.G = s.group();
  p.qOffset = s.qOffset;
  p.scale = r.scale;
  p.softcap = r.softcap;

  // The mask program, documents ids concatenated.
  std::vector<DevMaskOp> ops;
  std::vector<std::int32_t> ids;
  for (const MaskProgram::PostfixOp& op : r.mask->Postfix()) {
    DevMaskOp d{};
    d.kind = KindOf(op.kind);
    d.value = op.value;
    if (op.kind == MaskKind::kDocuments) {
      d.idsOffset = static_cast<long long>(ids.size());
      d.idsStride = op.idsStride;
      ids.insert(ids.end(), op.ids, op.ids + op.idsStride * op.idsBatch);
    }
    ops.push_back(d);
  }
  ops_ = Upload(device, ops, "cuda attention mask program");
  ids_ = Upload(device, ids, "cuda attention mask document ids");
  p.mask.ops = ops_.data();
  p.mask.count = static_cast<int>(ops.size());
  p.mask.ids = ids_.data();
  if (!withTiles) return;

  // The 64-tile classification: the caller's block mask (converted when its block size differs)
  // or one built here.
  BlockMask local;
  const BlockMask* bm = opts.blockMask;
  if (bm != nullptr) {
    bm->CheckFits(s, "blockMask");
  } else {
    local = BlockMask::Build(*r.mask, s, kTile);
    bm = &local;
  }
  const std::int64_t qT = (s.qLen + kTile - 1) / kTile, kT = (s.kvLen + kTile - 1) / kTile, E = bm->batch();
  if (static_cast<double>(E) * static_cast<double>(qT) * static_cast<double>(kT) > 2.0e9) {
    throw ArgumentError("the CUDA attention kernels take at most 2e9 tiles per call");
  }
  std::vector<std::uint8_t> states(static_cast<std::size_t>(E * qT * kT));
  for (std::int64_t e = 0; e < E; ++e) {
    for (std::int64_t qt = 0; qt < qT; ++qt) {
      const std::int64_t r0 = qt * kTile, r1 = std::min(r0 + kTile, s.qLen) - 1;
      for (std::int64_t kt = 0; kt < kT; ++kt) {
        const std::int64_t c0 = kt * kTile, c1 = std::min(c0 + kTile, s.kvLen) - 1;
        const BlockState st = bm->blockSize() == kTile ? bm->State(e, qt, kt) : Combine(*bm, e, r0, r1, c0, c1);
        states[static_cast<std::size_t>((e * qT + qt) * kT + kt)] = st;
        ++counts_[st];
      }
    }
  }
  std::vector<std::int32_t> kvPtr(1, 0), kvIdx, qPtr(1, 0), qIdx;
  for (std::int64_t e = 0; e < E; ++e) {
    for (std::int64_t qt = 0; qt < qT; ++qt) {
      for (std::int64_t kt = 0; kt < kT; ++kt) {
        if (states[static_cast<std::size_t>((e * qT + qt) * kT + kt)] != kBlockEmpty)
          kvIdx.push_back(static_cast<std::int32_t>(kt));
      }
      kvPtr.push_back(static_cast<std::int32_t>(kvIdx.size()));
    }
    for (std::int64_t kt = 0; kt < kT; ++kt) {
      for (std::int64_t qt = 0; qt < qT; ++qt) {
        if (states[static_cast<std::size_t>((e * qT + qt) * kT + kt)] != kBlockEmpty)
          qIdx.push_back(static_cast<std::int32_t>(qt));
      }
      qPtr.push_back(static_cast<std::int32_t>(qIdx.size()));
    }
  }
  states_ = Upload(device, states, "cuda attention tile states");
  kvPtr_ = Upload(device, kvPtr, "cuda attention tile lists");
  kvIdx_ = Upload(device, kvIdx, "cuda attention tile lists");
  qPtr_ = Upload(device, qPtr, "cuda attention tile lists");
  qIdx_ = Upload(device, qIdx, "cuda attention tile lists");
  p.tiles.states = states_.data();
  p.tiles.kvPtr = kvPtr_.data();
  p.tiles.kvIdx = kvIdx_.data();
  p.tiles.qPtr = qPtr_.data();
  p.tiles.qIdx = qIdx_.data();
  p.tiles.qTiles = static_cast<int>(qT);
  p.tiles.kTiles = static_cast<int>(kT);
  p.tiles.entries = static_cast<int>(E);
}

void RequireSharedMemory(std::size_t bytes, const char* kernel) {
  int device = 0, optin = 0;
  SFX_CUDA_CHECK(cudaGetDevice(&device));
  SFX_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<std::size_t>(optin)) {
    throw DeviceError(std::string(kernel) + " needs " + std::to_string(bytes) +
                      " bytes of shared memory per block; cuda:" + std::to_string(device) + " allows " +
                      std::to_string(optin) + " (use a smaller headDim, impl 'eager', or the cpu)");
  }
}

}  // namespace sinkflex::attention::cuda
