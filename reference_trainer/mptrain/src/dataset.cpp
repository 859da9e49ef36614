// Loading and batching FashionMNIST (see dataset.h).
#include "dataset.h"

#include "errors.h"
#include "idx_file.h"
#include "resize.h"

#include <fmt/format.h>

#include <algorithm>

namespace mptrain {

ImageSet load_image_set(const std::string& dir, const std::string& prefix, int64_t subset) {
  const std::string image_path = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string label_path = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  IdxArray images = read_idx_gz(image_path, 3);
  IdxArray labels = read_idx_gz(label_path, 1);
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(fmt::format("{}: holds {} labels but {} holds {} images; {}", label_path,
                                labels.dims[0], image_path, images.dims[0], dataset_hint()));
  }
  if (images.dims[0] == 0 || images.dims[1] == 0 || images.dims[2] == 0) {
    throw DataError(fmt::format("{}: holds no images; {}", image_path, dataset_hint()));
  }
  for (uint8_t label : labels.values) {
    if (label >= kNumClasses) {
      throw DataError(fmt::format("{}: label {} out of range 0..{}; {}", label_path, label,
                                  kNumClasses - 1, dataset_hint()));
    }
  }
  ImageSet set;
  set.name = prefix == "t10k" ? "test" : prefix;
  set.rows = static_cast<int>(images.dims[1]);
  set.cols = static_cast<int>(images.dims[2]);
  set.count = images.dims[0];
  if (subset > 0 && subset < set.count) set.count = subset;
  std::size_t plane = static_cast<std::size_t>(set.rows) * static_cast<std::size_t>(set.cols);
  // Copied once, at their final size, into memory the kernel library provides (category data).
  const bool train = set.name == "train";
  set.pixels = DataBytes(DataAllocator<uint8_t>(train ? "dataset.train.images" : "dataset.test.images"));
  set.labels = DataBytes(DataAllocator<uint8_t>(train ? "dataset.train.labels" : "dataset.test.labels"));
  set.pixels.assign(images.values.begin(), images.values.begin() + static_cast<std::ptrdiff_t>(set.count * plane));
  set.labels.assign(labels.values.begin(), labels.values.begin() + static_cast<std::ptrdiff_t>(set.count));
  return set;
}

EpochOrder::EpochOrder(int64_t count, uint64_t seed) : order_(static_cast<std::size_t>(count)), rng_(seed) {}

const std::vector<uint32_t>& EpochOrder::next_epoch() {
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<uint32_t>(i);
  // Fisher-Yates with our own index draw: std::uniform_int_distribution is not the same
  // sequence across standard libraries, and runs must repeat exactly.
  for (std::size_t i = order_.size(); i > 1; --i) {
    std::size_t j = static_cast<std::size_t>(rng_() % i);
    std::swap(order_[i - 1], order_[j]);
  }
  return order_;
}

void fill_batch(const ImageSet& set, const std::vector<uint32_t>& order, int64_t begin, int64_t n,
                int image_size, float* images, int32_t* labels) {
  const std::size_t plane = static_cast<std::size_t>(set.rows) * static_cast<std::size_t>(set.cols);
  const std::size_t out_plane = static_cast<std::size_t>(image_size) * static_cast<std::size_t>(image_size);
  const bool resize = image_size != set.rows || image_size != set.cols;
  std::vector<float> normalised(plane);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t example = order[static_cast<std::size_t>(begin + i)];
    const uint8_t* src = set.pixels.data() + example * plane;
    float* dst = resize ? normalised.data() : images + static_cast<std::size_t>(i) * out_plane;
    for (std::size_t p = 0; p < plane; ++p) dst[p] = (static_cast<float>(src[p]) / 255.0f - 0.5f) / 0.5f;
    if (resize) {
      resize_bilinear_into(normalised.data(), set.rows, set.cols,
                           images + static_cast<std::size_t>(i) * out_plane, image_size, image_size);
    }
    labels[i] = set.labels[example];
  }
}

}  // namespace mptrain
