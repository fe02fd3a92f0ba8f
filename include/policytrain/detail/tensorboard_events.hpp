#pragma once
/// \file
/// The few pieces of TensorBoard's event file format that callbacks::TensorBoard writes, encoded by hand:
/// TFRecord framing (length, masked CRC32C of the length, data, masked CRC32C of the data) and the protobuf
/// messages Event, Summary, Summary.Value, SummaryMetadata(.PluginData), HistogramProto, TensorProto (strings)
/// and the hparams plugin's HParamsPluginData. Field numbers are those of tensorflow/core/util/event.proto,
/// tensorflow/core/framework/summary.proto and tensorboard/plugins/hparams/{api,plugin_data}.proto; the test
/// suite reads the files back with TensorBoard's own EventAccumulator. Also a reader of the framing and of an
/// Event's step, to cut a run directory back to a resumed step.
#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <policytrain/detail/config.hpp>

namespace policytrain::detail::tb {

/// CRC32C (Castagnoli), as TFRecord uses.
POLICYTRAIN_DECL uint32_t crc32c(const char* data, size_t n)
#if POLICYTRAIN_DEFINE
{
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ static_cast<uint8_t>(data[i])) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}
#else
;
#endif
/// The masked CRC32C of TFRecord ("a rotation and an offset", so a CRC of CRCs is not trivially a CRC).
inline uint32_t masked_crc32c(const char* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/// A protobuf message under construction: fields appended in any order, little-endian wire format.
class Message {
 public:
  /// Appends a varint field (int32, int64, enum, bool).
  Message& varint(int field, uint64_t v) {
    key(field, 0);
    put_varint(v);
    return *this;
  }
  /// Appends a double field (wire type 1).
  Message& f64(int field, double v) {
    key(field, 1);
    char b[8];
    std::memcpy(b, &v, 8);  // the targets are little-endian, as the wire format
    s_.append(b, 8);
    return *this;
  }
  /// Appends a float field (wire type 5).
  Message& f32(int field, float v) {
    key(field, 5);
    char b[4];
    std::memcpy(b, &v, 4);
    s_.append(b, 4);
    return *this;
  }
  /// Appends a length-delimited field: a string, bytes or a nested message.
  Message& bytes(int field, std::string_view v) {
    key(field, 2);
    put_varint(v.size());
    s_.append(v);
    return *this;
  }
  /// Appends a nested message.
  Message& msg(int field, const Message& m) { return bytes(field, m.s_); }
  /// Appends a packed repeated double field.
  Message& packed_f64(int field, const std::vector<double>& v) {
    std::string b(v.size() * 8, '\0');
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return bytes(field, b);
  }
  /// The encoded bytes.
  const std::string& str() const { return s_; }

 private:
  void key(int field, int wire) { put_varint((static_cast<uint64_t>(field) << 3) | wire); }
  void put_varint(uint64_t v) {
    while (v >= 0x80) {
      s_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    s_.push_back(static_cast<char>(v));
  }
  std::string s_;
};

/// One TFRecord: the framing around `data`.
POLICYTRAIN_DECL std::string record(const std::string& data)
#if POLICYTRAIN_DEFINE
{
  std::string r;
  const uint64_t n = data.size();
  char len[8];
  std::memcpy(len, &n, 8);
  r.append(len, 8);
  const uint32_t lc = masked_crc32c(len, 8);
  r.append(reinterpret_cast<const char*>(&lc), 4);
  r.append(data);
  const uint32_t dc = masked_crc32c(data.data(), data.size());
  r.append(reinterpret_cast<const char*>(&dc), 4);
  return r;
}
#else
;
#endif

/// Event { double wall_time = 1; int64 step = 2; oneof { string file_version = 3; Summary summary = 5; } }.
POLICYTRAIN_DECL Message event(double wall_time, int64_t step)
#if POLICYTRAIN_DEFINE
{
  Message e;
  e.f64(1, wall_time).varint(2, static_cast<uint64_t>(step));
  return e;
}
#else
;
#endif

/// SummaryMetadata { PluginData plugin_data = 1 { string plugin_name = 1; bytes content = 2; } }.
POLICYTRAIN_DECL Message plugin_metadata(std::string_view plugin, std::string_view content)
#if POLICYTRAIN_DEFINE
{
  Message pd;
  pd.bytes(1, plugin);
  if (!content.empty()) pd.bytes(2, content);
  Message md;
  md.msg(1, pd);
  return md;
}
#else
;
#endif

/// The records of a TFRecord file, each with its Event's step; stops at the first torn or corrupt record
/// (a process killed while writing). `valid_bytes` is where the well-formed records end.
struct RecordScan {
  std::vector<std::string> records;
  std::vector<std::optional<int64_t>> steps;
  uint64_t valid_bytes = 0;
};

/// The step (field 2) of an encoded Event, if present.
POLICYTRAIN_DECL std::optional<int64_t> event_step(const std::string& ev)
#if POLICYTRAIN_DEFINE
{
  size_t i = 0;
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; i < ev.size() && shift < 64; shift += 7) {
      const uint8_t b = static_cast<uint8_t>(ev[i++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (i < ev.size()) {
    uint64_t k = 0, v = 0;
    if (!varint(k)) return std::nullopt;
    switch (k & 7) {
      case 0:
        if (!varint(v)) return std::nullopt;
        if ((k >> 3) == 2) return static_cast<int64_t>(v);
        break;
      case 1: i += 8; break;
      case 5: i += 4; break;
      case 2:
        if (!varint(v)) return std::nullopt;
        i += v;
        break;
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}
#else
;
#endif

/// Reads the records of the file at `path` (see RecordScan).
POLICYTRAIN_DECL RecordScan scan(const std::string& path)
#if POLICYTRAIN_DEFINE
{
  RecordScan out;
  std::ifstream f(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t p = 0;
  while (p + 12 <= all.size()) {
    uint64_t n;
    uint32_t lc, dc;
    std::memcpy(&n, all.data() + p, 8);
    std::memcpy(&lc, all.data() + p + 8, 4);
    if (lc != masked_crc32c(all.data() + p, 8) || p + 12 + n + 4 > all.size()) break;
    std::string data = all.substr(p + 12, n);
    std::memcpy(&dc, all.data() + p + 12 + n, 4);
    if (dc != masked_crc32c(data.data(), data.size())) break;
    out.steps.push_back(event_step(data));
    out.records.push_back(std::move(data));
    p += 12 + n + 4;
  }
  out.valid_bytes = p;
  return out;
}
#else
;
#endif

}  // namespace policytrain::detail::tb
