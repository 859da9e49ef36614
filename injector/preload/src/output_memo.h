// The statistics a launch measured of its outputs, remembered until those bytes are written again,
// so that a later launch reading the same bytes as an input gets them without a second scan.
//
// A training step reads almost every tensor it wrote: the activation a convolution made is the
// next ReLU's input, the gradient a backward kernel made is the optimizer's input. Scanning it
// again gives the same numbers; looking them up costs a map search instead of a pass over memory.
//
// Soundness rests on seeing every write to the program's memory:
//   - a launch writes only its outputs (the kernel ABI's rule: in-place tensors are outputs too);
//     every launch's outputs are reported through written() before the kernel runs, whether or not
//     the launch is measured;
//   - any other write the program makes to memory it got from mpt_alloc is declared through
//     mpt_host_written() (mpt/abi.h), which reports it here as well;
//   - a fresh allocation and a freed one forget everything inside them.
// Only memory inside a live mpt_alloc allocation is remembered, and a remembered entry answers only
// for exactly the same bytes (data pointer, dtype and element count): a view of part of a tensor,
// or the same bytes read as another dtype, is scanned. A write anywhere in an allocation forgets
// every entry of that allocation, so aliasing views can never keep stale numbers.
//
// Thread-safe. generation() is read before an output is scanned and handed back to remember(), so
// a write that lands while the scan runs (another thread's launch) keeps the result out.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "fpscope/tensor_stats.h"

namespace fpscope::inject {

class OutputMemo {
 public:
  // What the memo answers for: these bytes, read as this element type.
  struct Key {
    const void* data = nullptr;
    ElementType type = ElementType::F32;
    uint64_t count = 0;
    friend bool operator==(const Key&, const Key&) = default;
  };

  // A new allocation: whatever was remembered of memory it overlaps is forgotten. Statistics of
  // tensors inside it are remembered only when `remembered` (memory the program may write unseen,
  // a front end's data, is not).
  void allocated(const void* base, uint64_t bytes, bool remembered = true);
  void freed(const void* base);
  // [data, data + bytes) is about to be (or was) written.
  void written(const void* data, uint64_t bytes);
  // Any memory may have been written: forgets every entry.
  void written_anywhere();

  // The write generation of the allocation holding the key's bytes, or 0 when no live allocation
  // holds them whole (such tensors are never remembered).
  uint64_t generation(const Key& key) const;
  // Remembers `stats` (measured at `level`) for `key` if nothing was written to its allocation
  // since generation() returned `generation`.
  void remember(const Key& key, StatsLevel level, uint64_t generation, const TensorStats& stats);
  // The remembered statistics of exactly these bytes at this level, if any; `intended` (may be
  // null) gets the kinds of non-finite value they hold as intended values (see intended()).
  bool recall(const Key& key, StatsLevel level, TensorStats* out, uint8_t* intended = nullptr) const;
  // The launch that wrote these bytes made their non-finite values of `kinds` (allow_rules.h bits)
  // as intended values; a later reader passes them on as such. Forgotten with the entry.
  void intended(const Key& key, StatsLevel level, uint8_t kinds);

  // How many histogram bins an entry keeps beside its other numbers; a wider span is kept apart.
  static constexpr std::size_t kInlineBins = 64;

  // Lookups answered from memory, for the run's metadata and the tests.
  uint64_t hits() const;
  size_t entries() const;

 private:
  // An entry holds the statistics with only the populated span of their exponent histogram: it is
  // read back after the scans of other tensors have pushed it out of the caches, and most tensors
  // span a few dozen of the histogram's 277 bins, so a recall reads a dozen cache lines, not forty.
  static constexpr std::size_t kStatsHeadBytes = offsetof(TensorStats, hist);
  struct Entry {
    Key key;
    StatsLevel level = StatsLevel::Basic;
    uint8_t intended = 0;
    uint16_t hist_first = 0, hist_count = 0;   // hist[hist_first, hist_first + hist_count)
    alignas(8) unsigned char head[kStatsHeadBytes]{};  // the TensorStats before its histogram
    std::array<uint64_t, kInlineBins> bins{};          // the span, when it fits
    std::vector<uint64_t> wide;                        // the span, when it does not
    void store(const TensorStats& stats);
    void load(TensorStats* out) const;
  };
  struct Region {
    uint64_t bytes = 0;
    uint64_t generation = 1;
    std::vector<Entry> entries;
  };
  using Regions = std::map<uintptr_t, Region>;

  // The live allocation holding [begin, end) whole, or nullptr.
  const Region* holding(uintptr_t begin, uintptr_t end) const;
  Region* holding(uintptr_t begin, uintptr_t end);

  mutable std::mutex mutex_;
  Regions regions_;          // by base address
  uint64_t next_generation_ = 2;
  mutable uint64_t hits_ = 0;
};

}  // namespace fpscope::inject
