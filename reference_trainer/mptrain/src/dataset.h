// FashionMNIST in memory: the raw 8-bit images and labels of one split, the epoch order
// (shuffled from --seed), and the conversion of a batch into normalised float pixels
// ((x/255 - 0.5)/0.5), resized bilinearly when --image-size asks for more than 28 pixels.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace mptrain {

inline constexpr int kNumClasses = 10;

struct ImageSet {
  std::string name;            // "train" or "test"
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<uint8_t> pixels; // count*rows*cols
  std::vector<uint8_t> labels; // count
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
