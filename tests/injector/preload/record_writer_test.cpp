// Tests of record framing and string interning.
#include "record_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "memory_sink.h"

namespace fpscope::inject {
namespace {

using testing::DecodedTrace;
using testing::MemorySink;

DecodedTrace decode(const MemorySink& sink) {
  DecodedTrace t;
  for (const auto& r : sink.records) t.add(r.data());
  return t;
}

TEST(RecordWriter, HeaderAndZeroedPadding) {
  MemorySink sink;
  RecordWriter w(&sink);
  wire::FreeRecord f{};
  f.id = 42;
  f.bytes = 4096;
  f.h.thread = 999;  // overwritten by put()
  ASSERT_TRUE(w.put(f, 3));
  ASSERT_EQ(sink.records.size(), 1u);
  ASSERT_EQ(sink.records[0].size(), 64u);
  wire::FreeRecord back;
  std::memcpy(&back, sink.records[0].data(), sizeof back);
  EXPECT_EQ(back.h.type, wire::RecordType::Free);  // from the record list, not the caller
  EXPECT_EQ(back.h.slots, 1);
  EXPECT_EQ(back.h.thread, 3u);
  EXPECT_EQ(back.id, 42u);
  EXPECT_EQ(back.bytes, 4096u);
}

TEST(RecordWriter, TailSpillsIntoFollowingSlotsAndIsZeroPadded) {
  MemorySink sink;
  RecordWriter w(&sink);
  wire::TensorHistogramRecord h{};
  h.bins = 3;
  wire::HistogramBin bins[3] = {{-3, 0, 5}, {0, 0, 7}, {12, 0, 1}};
  ASSERT_TRUE(w.put_with_tail(h, bins, sizeof bins, 1));
  const auto& r = sink.records.at(0);
  ASSERT_EQ(r.size(), 128u);  // 64 fixed + 48 of bins, rounded up
  EXPECT_EQ(reinterpret_cast<const wire::RecordHeader*>(r.data())->slots, 2);
  wire::HistogramBin back[3];
  std::memcpy(back, r.data() + 64, sizeof back);
  EXPECT_EQ(back[0].exponent, -3);
  EXPECT_EQ(back[2].count, 1u);
  for (size_t i = 64 + sizeof bins; i < r.size(); ++i) ASSERT_EQ(r[i], 0) << "byte " << i;
}

TEST(RecordWriter, StringsAreInternedOncePerContent) {
  MemorySink sink;
  RecordWriter w(&sink);
  std::string a = "conv2d_forward", b = "conv2d_forward";  // equal content, different storage
  const uint32_t id = w.intern(a, 1);
  EXPECT_EQ(id, 1u);
  EXPECT_EQ(w.intern(b, 2), id);
  EXPECT_EQ(w.intern("relu_forward", 1), 2u);
  EXPECT_EQ(w.intern("", 1), 3u);  // the empty string is a string too
  const DecodedTrace t = decode(sink);
  EXPECT_EQ(t.count(wire::RecordType::String), 3u);
  EXPECT_EQ(t.text(1), "conv2d_forward");
  EXPECT_EQ(t.text(2), "relu_forward");
  EXPECT_EQ(t.text(3), "");
}

// Lookups are kept by the text's address (RecordWriter::Recent): a buffer that is rewritten with
// another text, of the same length or not, gets that text's id, and a text seen again at another
// address keeps its id.
TEST(RecordWriter, AReusedBufferGetsTheIdOfWhatItHoldsNow) {
  MemorySink sink;
  RecordWriter w(&sink);
  char buffer[64] = "conv1.weight";
  const uint32_t weight = w.intern(std::string_view(buffer), 1);
  EXPECT_EQ(w.intern(std::string_view(buffer), 1), weight);
  std::memcpy(buffer, "conv2", 5);  // same place, same length, other text
  const uint32_t conv2 = w.intern(std::string_view(buffer), 1);
  EXPECT_NE(conv2, weight);
  std::strcpy(buffer, "conv1.bias");  // shorter
  const uint32_t bias = w.intern(std::string_view(buffer), 1);
  EXPECT_NE(bias, weight);
  EXPECT_NE(bias, conv2);
  std::strcpy(buffer, "conv1.weight");  // back again: the first id, no new String
  EXPECT_EQ(w.intern(std::string_view(buffer), 1), weight);
  buffer[5] = '\0';  // a prefix of what was there: the same bytes, shorter
  const uint32_t conv1 = w.intern(std::string_view(buffer), 1);
  EXPECT_NE(conv1, weight);
  const std::string elsewhere = "conv2.weight";
  EXPECT_EQ(w.intern(elsewhere, 1), conv2);
  // The empty text, from nowhere or from somewhere: a string of its own, sent once (id != 0).
  const uint32_t empty = w.intern(std::string_view{}, 1);
  EXPECT_NE(empty, 0u);
  EXPECT_EQ(w.intern(std::string_view(buffer, 0), 1), empty);
  EXPECT_EQ(w.intern(std::string_view{}, 1), empty);
  const DecodedTrace t = decode(sink);
  EXPECT_EQ(t.count(wire::RecordType::String), 5u);
  EXPECT_EQ(t.text(weight), "conv1.weight");
  EXPECT_EQ(t.text(conv2), "conv2.weight");
  EXPECT_EQ(t.text(bias), "conv1.bias");
  EXPECT_EQ(t.text(conv1), "conv1");
  EXPECT_EQ(t.text(empty), "");
}

TEST(RecordWriter, LongStringsSpanSlotsAndAreCut) {
  MemorySink sink;
  RecordWriter w(&sink);
  const std::string medium(200, 'm');
  const std::string huge(wire::kMaxStringBytes + 100, 'h');
  const uint32_t m = w.intern(medium, 1);
  const uint32_t h = w.intern(huge, 1);
  const DecodedTrace t = decode(sink);
  EXPECT_EQ(t.text(m), medium);
  EXPECT_EQ(t.text(h), huge.substr(0, wire::kMaxStringBytes));
  EXPECT_EQ(sink.records[0].size(), 4 * 64u);  // 16 + 200 bytes
  EXPECT_EQ(w.intern(huge.substr(0, wire::kMaxStringBytes), 1), h);
}

TEST(RecordWriter, DroppedStringIsSentAgainOnNextUse) {
  MemorySink sink;
  RecordWriter w(&sink);
  const char* lost = "lost";  // one address, so that a kept lookup would answer the second time
  sink.full = true;
  EXPECT_FALSE(w.put(wire::FreeRecord{}, 1));
  w.intern(lost, 1);
  sink.full = false;
  const uint32_t id = w.intern(lost, 1);
  const DecodedTrace t = decode(sink);
  EXPECT_EQ(t.count(wire::RecordType::String), 1u);
  EXPECT_EQ(t.text(id), "lost");
}

}  // namespace
}  // namespace fpscope::inject
