// FashionMNIST in memory: the raw 8-bit images and labels of one split, the epoch order
// (shuffled from --seed), and the conversion of a batch into normalised float pixels
// ((x/255 - 0.5)/0.5), resized bilinearly when --image-size asks for more than 28 pixels.
#pragma once

#include "tensor.h"

#include <mpt/abi.h>

#include <cstdint>
#include <new>
#include <random>
#include <type_traits>
#include <string>
#include <vector>

namespace mptrain {

inline constexpr int kNumClasses = 10;

// Host memory for the dataset from mpt_alloc() (category data, named by `name`) and in the memory
// ledger: the images a run holds are part of its footprint, in its own report and in a trace.
template <typename T>
struct DataAllocator {
  using value_type = T;
  // The name travels with the bytes when a vector is assigned or swapped.
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  const char* name = "dataset";

  DataAllocator() = default;
  explicit DataAllocator(const char* what) : name(what) {}
  template <typename U>
  DataAllocator(const DataAllocator<U>& other) : name(other.name) {}  // NOLINT: rebinding is implicit

  T* allocate(std::size_t n) {
    uint64_t id = 0;
    void* p = mpt_alloc(n * sizeof(T), MPT_DEVICE_CPU, MPT_CAT_DATA, name, &id);
    if (p == nullptr) throw std::bad_alloc();
    memory_ledger().on_alloc(MPT_CAT_DATA, n * sizeof(T));
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) {
    mpt_free(p, MPT_DEVICE_CPU);
    memory_ledger().on_free(MPT_CAT_DATA, n * sizeof(T));
  }
  template <typename U>
  bool operator==(const DataAllocator<U>&) const { return true; }  // any one frees what another made
};
using DataBytes = std::vector<uint8_t, DataAllocator<uint8_t>>;

struct ImageSet {
  std::string name;            // "train" or "test"
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  DataBytes pixels;            // count*rows*cols
  DataBytes labels;            // count
};

// Loads "<dir>/<prefix>-images-idx3-ubyte.gz" and "<dir>/<prefix>-labels-idx1-ubyte.gz"
// (prefix "train" or "t10k"), keeping the first `subset` examples when subset > 0.
// Throws DataError on a missing or malformed file or when the files disagree.
ImageSet load_image_set(const std::string& dir, const std::string& prefix, int64_t subset);

// Order of the examples for each epoch: a Fisher-Yates shuffle driven by one generator seeded
// once, so the sequence of epochs is fixed by the seed.
class EpochOrder {
 public:
  EpochOrder(int64_t count, uint64_t seed);
  const std::vector<uint32_t>& next_epoch();

 private:
  std::vector<uint32_t> order_;
  std::mt19937_64 rng_;
};

// Writes `n` normalised images of side `image_size` (example indices order[begin..begin+n))
// into `images` (n*image_size*image_size floats) and their labels into `labels`.
void fill_batch(const ImageSet& set, const std::vector<uint32_t>& order, int64_t begin, int64_t n,
                int image_size, float* images, int32_t* labels);

}  // namespace mptrain
