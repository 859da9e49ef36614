// Dataset tests: IDX parsing of small gzip files written here, the errors for missing and
// malformed files, normalisation, shuffling, and bilinear resizing checked against numpy.
#include "dataset.h"
#include "errors.h"
#include "idx_file.h"
#include "resize.h"

#include <gtest/gtest.h>

#include "temp_path.h"
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace mptrain;

namespace {

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& values) {
  std::vector<uint8_t> out;
  put_u32(out, magic);
  for (uint32_t d : dims) put_u32(out, d);
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

void write_gz(const fs::path& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

class DataFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
  }

  // 3 images of 2x3 pixels with values 0..17 and labels 7, 0, 9.
  void write_valid(const std::string& prefix) {
    std::vector<uint8_t> pixels(18);
    for (int i = 0; i < 18; ++i) pixels[static_cast<std::size_t>(i)] = static_cast<uint8_t>(i * 15);
    write_gz(dir_ / (prefix + "-images-idx3-ubyte.gz"), idx_bytes(0x803, {3, 2, 3}, pixels));
    write_gz(dir_ / (prefix + "-labels-idx1-ubyte.gz"), idx_bytes(0x801, {3}, {7, 0, 9}));
  }

  std::string error_of(const std::string& prefix) {
    try {
      load_image_set(dir_.string(), prefix, 0);
    } catch (const DataError& e) {
      return e.what();
    }
    return "";
  }

  fpscope::test::TempDir temp_{"mptrain-data"};  // one folder per test (gtest makes a fixture per test)
  fs::path dir_;
};

TEST_F(DataFiles, ParsesImagesAndLabels) {
  write_valid("train");
  ImageSet set = load_image_set(dir_.string(), "train", 0);
  EXPECT_EQ(set.count, 3);
  EXPECT_EQ(set.rows, 2);
  EXPECT_EQ(set.cols, 3);
  ASSERT_EQ(set.pixels.size(), 18u);
  EXPECT_EQ(set.pixels[17], 255);
  EXPECT_EQ(set.labels, (DataBytes{7, 0, 9}));
}

// The dataset lives in memory the kernel library provides, counted as data in the ledger.
TEST_F(DataFiles, HeldInDataMemoryThatTheLedgerCounts) {
  write_valid("train");
  const std::size_t live_before = memory_ledger().live_total();
  {
    ImageSet set = load_image_set(dir_.string(), "train", 2);
    EXPECT_EQ(set.pixels.get_allocator().name, std::string("dataset.train.images"));
    EXPECT_EQ(set.labels.get_allocator().name, std::string("dataset.train.labels"));
    EXPECT_EQ(memory_ledger().live_total(), live_before + 12 + 2);  // 2 images of 2x3, 2 labels
    EXPECT_GE(memory_ledger().peak(MPT_CAT_DATA), 14u);
  }
  EXPECT_EQ(memory_ledger().live_total(), live_before);
}

TEST_F(DataFiles, SubsetKeepsTheFirstExamples) {
  write_valid("t10k");
  ImageSet set = load_image_set(dir_.string(), "t10k", 2);
  EXPECT_EQ(set.name, "test");
  EXPECT_EQ(set.count, 2);
  EXPECT_EQ(set.pixels.size(), 12u);
  EXPECT_EQ(set.labels, (DataBytes{7, 0}));
}

TEST_F(DataFiles, MissingFileNamesFileAndPackage) {
  std::string error = error_of("train");
  EXPECT_NE(error.find("train-images-idx3-ubyte.gz"), std::string::npos) << error;
  EXPECT_NE(error.find("not found"), std::string::npos) << error;
  EXPECT_NE(error.find("dataset-fashion-mnist"), std::string::npos) << error;
  EXPECT_NE(error.find("--data-dir"), std::string::npos) << error;
}

TEST_F(DataFiles, BadMagicIsReported) {
  write_valid("train");
  write_gz(dir_ / "train-labels-idx1-ubyte.gz", idx_bytes(0x803, {3}, {7, 0, 9}));
  std::string error = error_of("train");
  EXPECT_NE(error.find("train-labels-idx1-ubyte.gz"), std::string::npos) << error;
  EXPECT_NE(error.find("bad magic"), std::string::npos) << error;
  EXPECT_NE(error.find("dataset-fashion-mnist"), std::string::npos) << error;
}

TEST_F(DataFiles, TruncatedDataIsReported) {
  write_valid("train");
  write_gz(dir_ / "train-images-idx3-ubyte.gz", idx_bytes(0x803, {3, 2, 3}, std::vector<uint8_t>(17, 1)));
  std::string error = error_of("train");
  EXPECT_NE(error.find("train-images-idx3-ubyte.gz"), std::string::npos) << error;
  EXPECT_NE(error.find("17 data bytes"), std::string::npos) << error;
}

TEST_F(DataFiles, TruncatedGzipStreamIsReported) {
  write_valid("train");
  const fs::path path = dir_ / "train-images-idx3-ubyte.gz";
  auto size = fs::file_size(path);
  fs::resize_file(path, size - 6);  // drops part of the gzip trailer
  std::string error = error_of("train");
  EXPECT_NE(error.find("train-images-idx3-ubyte.gz"), std::string::npos) << error;
  EXPECT_NE(error.find("dataset-fashion-mnist"), std::string::npos) << error;
}

TEST_F(DataFiles, ImageAndLabelCountsMustAgree) {
  write_valid("train");
  write_gz(dir_ / "train-labels-idx1-ubyte.gz", idx_bytes(0x801, {2}, {7, 0}));
  std::string error = error_of("train");
  EXPECT_NE(error.find("2 labels"), std::string::npos) << error;
  EXPECT_NE(error.find("3 images"), std::string::npos) << error;
}

TEST_F(DataFiles, LabelsOutOfRangeAreReported) {
  write_valid("train");
  write_gz(dir_ / "train-labels-idx1-ubyte.gz", idx_bytes(0x801, {3}, {7, 10, 9}));
  EXPECT_NE(error_of("train").find("label 10"), std::string::npos);
}

TEST(FillBatch, NormalisesToMinusOneOneInShuffledOrder) {
  ImageSet square;
  square.count = 2;
  square.rows = square.cols = 3;
  square.pixels = {0, 51, 102, 153, 204, 255, 0, 0, 255, 9, 9, 9, 9, 9, 9, 9, 9, 9};
  square.labels = {4, 6};
  std::vector<uint32_t> order{1, 0};
  std::vector<float> out(18);
  std::vector<int32_t> labels(2, -1);
  fill_batch(square, order, 0, 2, 3, out.data(), labels.data());
  EXPECT_EQ(labels, (std::vector<int32_t>{6, 4}));
  EXPECT_FLOAT_EQ(out[0], (9.0f / 255.0f - 0.5f) / 0.5f);
  EXPECT_FLOAT_EQ(out[9], -1.0f);
  EXPECT_FLOAT_EQ(out[14], 1.0f);
  EXPECT_FLOAT_EQ(out[10], (51.0f / 255.0f - 0.5f) / 0.5f);
}

TEST(FillBatch, ResizesWhenAskedForALargerImage) {
  ImageSet set;
  set.count = 1;
  set.rows = set.cols = 2;
  set.pixels = {0, 255, 255, 0};
  set.labels = {1};
  std::vector<uint32_t> order{0};
  std::vector<float> out(16);
  int32_t label = 0;
  fill_batch(set, order, 0, 1, 4, out.data(), &label);
  std::vector<float> normalised{-1, 1, 1, -1};
  EXPECT_EQ(out, resize_bilinear(normalised.data(), 2, 2, 4, 4));
}

TEST(EpochOrderTest, IsAPermutationFixedBySeed) {
  EpochOrder a(100, 7), b(100, 7), c(100, 8);
  std::vector<uint32_t> first = a.next_epoch();
  EXPECT_EQ(first, b.next_epoch());
  EXPECT_NE(first, c.next_epoch());
  EXPECT_EQ(std::set<uint32_t>(first.begin(), first.end()).size(), 100u);
  EXPECT_NE(first, a.next_epoch());  // each epoch reshuffles
}

// numpy computes the same half-pixel bilinear resize independently (vectorised, float64).
std::vector<double> numpy_resize(const std::vector<float>& src, int in_h, int in_w, int out_h, int out_w) {
  std::ostringstream script;
  script << "import numpy as np\n"
         << "src = np.array([" ;
  for (std::size_t i = 0; i < src.size(); ++i) script << (i ? "," : "") << src[i];
  script << "], dtype=np.float64).reshape(" << in_h << "," << in_w << ")\n"
         << "def axis(n_in, n_out):\n"
         << "    s = np.maximum((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0.0)\n"
         << "    lo = np.minimum(np.floor(s).astype(int), n_in - 1)\n"
         << "    hi = np.minimum(lo + 1, n_in - 1)\n"
         << "    return lo, hi, s - lo\n"
         << "ylo, yhi, fy = axis(" << in_h << "," << out_h << ")\n"
         << "xlo, xhi, fx = axis(" << in_w << "," << out_w << ")\n"
         << "top = src[ylo][:, xlo] * (1 - fx) + src[ylo][:, xhi] * fx\n"
         << "bot = src[yhi][:, xlo] * (1 - fx) + src[yhi][:, xhi] * fx\n"
         << "out = top * (1 - fy)[:, None] + bot * fy[:, None]\n"
         << "print(' '.join(repr(float(v)) for v in out.ravel()))\n";
  const fs::path path = fpscope::test::process_temp_dir().make_file("mptrain_resize", ".py");
  std::ofstream(path) << script.str();
  std::string command = std::string(FPSCOPE_REFERENCE_PYTHON) + " " + path.string();
  FILE* pipe = ::popen(command.c_str(), "r");
  std::vector<double> values;
  if (pipe == nullptr) return values;
  double v = 0.0;
  while (std::fscanf(pipe, "%lf", &v) == 1) values.push_back(v);
  ::pclose(pipe);
  fs::remove(path);
  return values;
}

void expect_resize_matches_numpy(int in_h, int in_w, int out_h, int out_w) {
  std::vector<float> src(static_cast<std::size_t>(in_h * in_w));
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>((i * 37) % 11) - 3.5f;
  std::vector<float> ours = resize_bilinear(src.data(), in_h, in_w, out_h, out_w);
  std::vector<double> reference = numpy_resize(src, in_h, in_w, out_h, out_w);
  ASSERT_EQ(reference.size(), ours.size());
  for (std::size_t i = 0; i < ours.size(); ++i) EXPECT_NEAR(ours[i], reference[i], 2e-5) << "element " << i;
}

TEST(BilinearResize, UpscaleMatchesNumpy) { expect_resize_matches_numpy(4, 5, 11, 13); }
TEST(BilinearResize, DownscaleMatchesNumpy) { expect_resize_matches_numpy(9, 7, 4, 3); }
TEST(BilinearResize, SeedSizeMatchesNumpy) { expect_resize_matches_numpy(28, 28, 128, 128); }

TEST(BilinearResize, SameSizeIsIdentity) {
  std::vector<float> src{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(resize_bilinear(src.data(), 2, 3, 2, 3), src);
}

}  // namespace
