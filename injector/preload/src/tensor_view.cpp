// Tensor facts and finiteness scans (see tensor_view.h).
#include "tensor_view.h"

#include <array>
#include <cstring>

namespace fpscope::inject {
namespace {

// Exponent mask and sign bit of each element type; all-ones exponent means NaN or Inf.
struct BitLayout {
  uint64_t exponent, sign;
};
constexpr BitLayout layout_of(ElementType type) {
  switch (type) {
    case ElementType::F64: return {0x7ff0000000000000u, 0x8000000000000000u};
    case ElementType::F32: return {0x7f800000u, 0x80000000u};
    case ElementType::F16: return {0x7c00u, 0x8000u};
    default: return {0x7f80u, 0x8000u};  // bf16
  }
}

// The 8-bit formats: what kind of value each pattern is (their NaNs and infinities follow no
// common bit pattern; fpscope/contract/number_formats.h).
enum class ByteKind : uint8_t { Finite, NaN, PosInf, NegInf };
struct ByteKinds {
  std::array<ByteKind, 256> of{};
};
constexpr ByteKinds byte_kinds(const contract::ByteFormat& f) {
  ByteKinds k;
  for (int b = 0; b < 256; ++b) {
    const auto bits = uint8_t(b);
    k.of[size_t(b)] = f.is_nan(bits)   ? ByteKind::NaN
                      : f.is_inf(bits) ? (f.negative(bits) ? ByteKind::NegInf : ByteKind::PosInf)
                                       : ByteKind::Finite;
  }
  return k;
}
constexpr std::array<ByteKinds, 6> kByteKinds = {byte_kinds(contract::kByteFormats[0]), byte_kinds(contract::kByteFormats[1]),
                                                 byte_kinds(contract::kByteFormats[2]), byte_kinds(contract::kByteFormats[3]),
                                                 byte_kinds(contract::kByteFormats[4]), byte_kinds(contract::kByteFormats[5])};
static_assert(kByteKinds.size() == contract::kByteFormats.size());
const ByteKinds& kinds_of_bytes(ElementType type) { return kByteKinds[size_t(int(type) - int(ElementType::E4M3))]; }

bool all_finite_bytes(const uint8_t* v, size_t n, const ByteKinds& k) {
  constexpr size_t kBlock = 1024;
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t end = start + kBlock < n ? start + kBlock : n;
    unsigned any = 0;
    for (size_t i = start; i < end; ++i) any |= static_cast<unsigned>(k.of[v[i]] != ByteKind::Finite);
    if (any) return false;
  }
  return true;
}

int64_t first_of_kind_bytes(const uint8_t* v, size_t n, const ByteKinds& k, bool want_nan) {
  for (size_t i = 0; i < n; ++i) {
    const ByteKind kind = k.of[v[i]];
    if (kind != ByteKind::Finite && (kind == ByteKind::NaN) == want_nan) return static_cast<int64_t>(i);
  }
  return -1;
}

template <typename Bits>
bool all_finite_bits(const Bits* v, size_t n, Bits exponent) {
  // Blocks of 1024 let the compiler vectorise the inner loop while still stopping early.
  constexpr size_t kBlock = 1024;
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t end = start + kBlock < n ? start + kBlock : n;
    unsigned any = 0;
    for (size_t i = start; i < end; ++i) any |= static_cast<unsigned>((v[i] & exponent) == exponent);
    if (any) return false;
  }
  return true;
}

template <typename Bits>
int64_t first_of_kind_bits(const Bits* v, size_t n, Bits exponent, bool want_nan) {
  const Bits mantissa = static_cast<Bits>(~exponent & static_cast<Bits>(exponent | (exponent - 1)));
  for (size_t i = 0; i < n; ++i) {
    if ((v[i] & exponent) != exponent) continue;
    const bool is_nan = (v[i] & mantissa) != 0;
    if (is_nan == want_nan) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace

std::optional<ElementType> float_type(int32_t dtype) {
  switch (dtype) {
    case MPT_DTYPE_F32: return ElementType::F32;
    case MPT_DTYPE_F16: return ElementType::F16;
    case MPT_DTYPE_BF16: return ElementType::BF16;
    case MPT_DTYPE_F64: return ElementType::F64;
    case MPT_DTYPE_E4M3: return ElementType::E4M3;
    case MPT_DTYPE_E5M2: return ElementType::E5M2;
    case MPT_DTYPE_E4M3FNUZ: return ElementType::E4M3FNUZ;
    case MPT_DTYPE_E5M2FNUZ: return ElementType::E5M2FNUZ;
    case MPT_DTYPE_E8M0: return ElementType::E8M0;
    case MPT_DTYPE_E2M1: return ElementType::E2M1;
    default: return std::nullopt;
  }
}

size_t dtype_bytes(int32_t dtype) {
  const size_t bytes = mpt_dtype_bytes(dtype);
  return bytes != 0 ? bytes : 4;
}

uint64_t element_count(const mpt_tensor& t) {
  uint64_t n = 1;
  for (int32_t d = 0; d < t.ndim && d < MPT_MAX_DIMS; ++d) n *= t.shape[d] > 0 ? uint64_t(t.shape[d]) : 0;
  return n;
}

bool measurable_on_host(const mpt_tensor& t) {
  return t.device == MPT_DEVICE_CPU && t.data != nullptr && float_type(t.dtype).has_value();
}

bool overlaps(const mpt_tensor& a, const mpt_tensor& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.data), b0 = reinterpret_cast<uintptr_t>(b.data);
  const uintptr_t a1 = a0 + element_count(a) * dtype_bytes(a.dtype);
  const uintptr_t b1 = b0 + element_count(b) * dtype_bytes(b.dtype);
  return a0 < b1 && b0 < a1;
}

bool all_finite(const void* data, ElementType type, size_t n) {
  if (is_byte_type(type)) return all_finite_bytes(static_cast<const uint8_t*>(data), n, kinds_of_bytes(type));
  const BitLayout l = layout_of(type);
  switch (type) {
    case ElementType::F64: return all_finite_bits(static_cast<const uint64_t*>(data), n, l.exponent);
    case ElementType::F32:
      return all_finite_bits(static_cast<const uint32_t*>(data), n, static_cast<uint32_t>(l.exponent));
    default:
      return all_finite_bits(static_cast<const uint16_t*>(data), n, static_cast<uint16_t>(l.exponent));
  }
}

int64_t first_of_kind(const void* data, ElementType type, size_t n, bool want_nan) {
  if (is_byte_type(type))
    return first_of_kind_bytes(static_cast<const uint8_t*>(data), n, kinds_of_bytes(type), want_nan);
  const BitLayout l = layout_of(type);
  switch (type) {
    case ElementType::F64:
      return first_of_kind_bits(static_cast<const uint64_t*>(data), n, l.exponent, want_nan);
    case ElementType::F32:
      return first_of_kind_bits(static_cast<const uint32_t*>(data), n, static_cast<uint32_t>(l.exponent),
                                want_nan);
    default:
      return first_of_kind_bits(static_cast<const uint16_t*>(data), n, static_cast<uint16_t>(l.exponent),
                                want_nan);
  }
}

uint64_t element_bits(const void* data, ElementType type, size_t i) {
  const size_t width = element_bytes(type);
  uint64_t bits = 0;  // little-endian: the low bytes
  std::memcpy(&bits, static_cast<const unsigned char*>(data) + width * i, width);
  return bits;
}

wire::NonfiniteKind nonfinite_kind(ElementType type, uint64_t bits) {
  if (is_byte_type(type)) {
    const ByteKind kind = kinds_of_bytes(type).of[bits & 0xFF];
    return kind == ByteKind::NegInf ? wire::NonfiniteKind::NegInf
           : kind == ByteKind::PosInf ? wire::NonfiniteKind::PosInf
                                      : wire::NonfiniteKind::NaN;
  }
  const BitLayout l = layout_of(type);
  const uint64_t mantissa = ~l.exponent & (l.sign - 1);
  if (bits & mantissa) return wire::NonfiniteKind::NaN;
  return (bits & l.sign) ? wire::NonfiniteKind::NegInf : wire::NonfiniteKind::PosInf;
}

const char* nonfinite_word(wire::NonfiniteKind kind) {
  switch (kind) {
    case wire::NonfiniteKind::NaN: return "NaN";
    case wire::NonfiniteKind::PosInf: return "+Inf";
    default: return "-Inf";
  }
}

}  // namespace fpscope::inject
