#pragma once
/// \file
/// The checkpoint file: a fixed header of our own, a JSON metadata block and a LibTorch archive, written
/// atomically. The header lets a reader detect a wrong file, truncation, flipped bytes and an incompatible
/// version before anything is parsed or loaded:
///
///     offset  size  field
///          0     8  magic "\x89PTCKPT\n" (a text-mode transfer or a foreign file fails here)
///          8     4  format version (kFormatVersion), little endian
///         12     4  metadata length in bytes
///         16     8  payload length in bytes
///         24     4  CRC-32 of the metadata (zlib)
///         28     4  CRC-32 of the payload
///         32     4  CRC-32 of bytes 0..31
///         36        metadata (UTF-8 JSON), then the payload (torch::serialize::OutputArchive bytes)
///
/// The file's size must be exactly 36 + metadata + payload. `write_atomic` writes a temporary file in the
/// same directory, fsyncs it, renames it over the target and fsyncs the directory: a crash at any instant
/// leaves either the old file or the new one. Cost: one CRC-32 pass over the payload on write and on read.
/// Note: with RLIMIT_FSIZE set, a write past the limit raises SIGXFSZ, whose default action kills the process;
/// ignore that signal to get the error (EFBIG) that write_atomic reports.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::checkpoint {

/// A checkpoint that cannot be written or read. The message names the file and what is wrong.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Version of the file format written; a reader refuses any other.
inline constexpr uint32_t kFormatVersion = 1;
/// Size of the fixed header in bytes.
inline constexpr size_t kHeaderSize = 36;
/// The first 8 bytes of every checkpoint file, "\x89PTCKPT\n".
inline constexpr std::array<unsigned char, 8> kMagic{0x89, 'P', 'T', 'C', 'K', 'P', 'T', '\n'};
/// Bounds on a file's metadata, checked on its raw bytes before the JSON parser (or anything recursive: a
/// comparison, a dump) touches them: its length in bytes, and how deep its arrays and objects nest.
inline constexpr uint32_t kMaxMetaBytes = uint32_t{16} << 20;
/// See kMaxMetaBytes.
inline constexpr size_t kMaxMetaDepth = 64;

namespace detail {

inline uint32_t crc32(std::string_view s) {
  return static_cast<uint32_t>(::crc32_z(::crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()), s.size()));
}
inline void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
POLICYTRAIN_DECL uint64_t get_le(const char* p, int bytes)
#if POLICYTRAIN_DEFINE
{
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
#else
;
#endif
[[noreturn]] inline void fail(const std::filesystem::path& file, const std::string& what) {
  throw CheckpointError(policytrain::detail::error_message(
      "policytrain::checkpoint", policytrain::detail::format(
          "{}: {}", file.string(), what)));
}

}  // namespace detail

/// The 36 header bytes for a metadata block and a payload.
POLICYTRAIN_DECL std::string make_header(std::string_view meta, std::string_view payload, uint32_t version = kFormatVersion)
#if POLICYTRAIN_DEFINE
{
  std::string h(reinterpret_cast<const char*>(kMagic.data()), kMagic.size());
  detail::put_le(h, version, 4);
  detail::put_le(h, meta.size(), 4);
  detail::put_le(h, payload.size(), 8);
  detail::put_le(h, detail::crc32(meta), 4);
  detail::put_le(h, detail::crc32(payload), 4);
  detail::put_le(h, detail::crc32(h), 4);
  return h;
}
#else
;
#endif

/// The parsed, validated header.
struct Header {
  /// Format version.
  uint32_t version = 0;
  /// Length of the metadata in bytes.
  uint32_t meta_size = 0;
  /// Length of the payload in bytes.
  uint64_t payload_size = 0;
  /// CRC-32 of the metadata.
  uint32_t meta_crc = 0;
  /// CRC-32 of the payload.
  uint32_t payload_crc = 0;
};

/// Validates the header of `file` (whose size is `file_size`): magic, header checksum, version, and that the
/// file is exactly as long as the header announces. Throws CheckpointError naming the file and the problem.
POLICYTRAIN_DECL Header parse_header(const std::filesystem::path& file, std::string_view h, uint64_t file_size)
#if POLICYTRAIN_DEFINE
{
  using detail::fail;
  if (file_size == 0) fail(file, "the file is empty (truncated, or written by a process that was killed before any byte)");
  if (h.size() >= 4 && h.substr(0, 4) == std::string_view("PK\x03\x04", 4))
    fail(file, "not a policytrain checkpoint: it is a zip archive (torch::save / torch.save format); load it with "
               "torch::load or torch.load");
  if (h.size() < kMagic.size() || std::memcmp(h.data(), kMagic.data(), kMagic.size()) != 0) {
    if (file_size < kMagic.size() && std::memcmp(h.data(), kMagic.data(), h.size()) == 0)
      fail(file, policytrain::detail::format("truncated: {} bytes, shorter than the {}-byte header", file_size, kHeaderSize));
    fail(file, "not a policytrain checkpoint (its first bytes are not the checkpoint magic)");
  }
  if (h.size() < kHeaderSize || file_size < kHeaderSize)
    fail(file, policytrain::detail::format("truncated: {} bytes, shorter than the {}-byte header", file_size, kHeaderSize));
  if (detail::crc32(h.substr(0, 32)) != detail::get_le(h.data() + 32, 4))
    fail(file, "the header is corrupt (its checksum does not match)");
  Header r;
  r.version = static_cast<uint32_t>(detail::get_le(h.data() + 8, 4));
  r.meta_size = static_cast<uint32_t>(detail::get_le(h.data() + 12, 4));
  r.payload_size = detail::get_le(h.data() + 16, 8);
  r.meta_crc = static_cast<uint32_t>(detail::get_le(h.data() + 24, 4));
  r.payload_crc = static_cast<uint32_t>(detail::get_le(h.data() + 28, 4));
  if (r.version != kFormatVersion)
    fail(file, policytrain::detail::format("incompatible version: checkpoint format {}, this build of policytrain reads format {}{}",
                           r.version, kFormatVersion,
                           r.version > kFormatVersion ? "; load it with the newer policytrain that wrote it" : ""));
  if (r.meta_size > kMaxMetaBytes)
    fail(file, policytrain::detail::format("the header's metadata length ({} bytes) exceeds the limit of {} bytes on metadata "
                           "(policytrain writes a few KiB): forged or not a policytrain checkpoint",
                           r.meta_size, kMaxMetaBytes));
  // Each length is checked against what the file really holds, without adding (a forged 64-bit length would
  // make 36 + meta + payload wrap around to the file's size).
  const uint64_t body = file_size - kHeaderSize;
  if (r.meta_size > body)
    fail(file, policytrain::detail::format("the header's metadata length ({} bytes) exceeds the {} bytes after the header (the file has "
                           "{}): truncated or forged", r.meta_size, body, file_size));
  if (r.payload_size > body - r.meta_size)
    fail(file, policytrain::detail::format("the header's payload length ({} bytes) exceeds the {} bytes after the metadata (the file has "
                           "{}): truncated or forged", r.payload_size, body - r.meta_size, file_size));
  const uint64_t expected = kHeaderSize + r.meta_size + r.payload_size;  // <= file_size: no overflow
  if (file_size > expected)
    fail(file, policytrain::detail::format("{} unexpected bytes after the payload (the header announces {} bytes, the file has {})",
                           file_size - expected, expected, file_size));
  return r;
}
#else
;
#endif

namespace detail {
/// `v` as JSON text for a message, cut after `max` characters (metadata is depth-bounded when read: dump is safe).
POLICYTRAIN_DECL std::string json_excerpt(const nlohmann::json& v, size_t max = 80)
#if POLICYTRAIN_DEFINE
{
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max) s = policytrain::detail::format("{}... ({} characters)", s.substr(0, max), s.size());
  return s;
}
#else
;
#endif
/// "a string", "an object", ...: the JSON type of `v`, for a message.
POLICYTRAIN_DECL std::string json_kind(const nlohmann::json& v)
#if POLICYTRAIN_DEFINE
{
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  return v.type_name();
}
#else
;
#endif
/// Throws CheckpointError: the metadata field `field` of `file` is `v`, not what was `expected`.
[[noreturn]] inline void bad_meta_field(const std::filesystem::path& file, const std::string& field,
                                        const nlohmann::json& v, std::string_view expected) {
  fail(file, policytrain::detail::format("the metadata field '{}' is {} ({}); expected {}", field, json_excerpt(v), json_kind(v), expected));
}
}  // namespace detail

namespace detail {
/// Reads `n` bytes at `offset` of `file`, whose size is `file_size`: a range past the end is refused before
/// anything is allocated (`what` names the field that asked for it).
POLICYTRAIN_DECL std::string read_bytes(const std::filesystem::path& file, uint64_t offset, uint64_t n, uint64_t file_size,
                              std::string_view what)
#if POLICYTRAIN_DEFINE
{
  if (offset > file_size || n > file_size - offset)
    fail(file, policytrain::detail::format("{}: {} bytes at offset {} lie past the end of the file ({} bytes)", what, n, offset, file_size));
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, policytrain::detail::format("cannot open for reading: {}", std::strerror(errno)));
  in.seekg(static_cast<std::streamoff>(offset));
  std::string s(static_cast<size_t>(n), '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}
#else
;
#endif
POLICYTRAIN_DECL uint64_t file_size_of(const std::filesystem::path& file)
#if POLICYTRAIN_DEFINE
{
  std::error_code ec;
  const auto n = std::filesystem::file_size(file, ec);
  if (ec) fail(file, policytrain::detail::format("cannot read: {}", ec.message()));
  return n;
}
#else
;
#endif
/// Where JSON text `text` nests its arrays and objects deeper than `limit` (brackets outside strings; the text is
/// not otherwise validated): the offset of the first bracket past the limit, or npos. Iterative: any depth is safe.
POLICYTRAIN_DECL size_t json_too_deep(std::string_view text, size_t limit)
#if POLICYTRAIN_DEFINE
{
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character, whatever it is
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}
#else
;
#endif
/// Checks the bounds of metadata text `meta` (kMaxMetaBytes, kMaxMetaDepth) before anything parses it.
POLICYTRAIN_DECL void check_meta_bounds(const std::filesystem::path& file, std::string_view meta)
#if POLICYTRAIN_DEFINE
{
  if (meta.size() > kMaxMetaBytes)
    fail(file, policytrain::detail::format("the metadata is {} bytes; expected at most {}", meta.size(), kMaxMetaBytes));
  if (const size_t at = json_too_deep(meta, kMaxMetaDepth); at != std::string_view::npos)
    fail(file, policytrain::detail::format("the metadata is nested more than {} levels deep (at byte {} of {}); expected at most {} "
                           "levels of arrays and objects: forged or not a policytrain checkpoint",
                           kMaxMetaDepth, at, meta.size(), kMaxMetaDepth));
}
#else
;
#endif
POLICYTRAIN_DECL nlohmann::json parse_meta(const std::filesystem::path& file, std::string_view meta, uint32_t crc)
#if POLICYTRAIN_DEFINE
{
  if (detail::crc32(meta) != crc) fail(file, "the metadata is corrupt (its checksum does not match)");
  check_meta_bounds(file, meta);
  auto j = nlohmann::json::parse(meta, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(file, policytrain::detail::format("the metadata ({} bytes) is not valid JSON; expected a JSON object", meta.size()));
  if (!j.is_object())
    fail(file, policytrain::detail::format("the metadata is {} ({}); expected a JSON object", json_excerpt(j), json_kind(j)));
  return j;
}
#else
;
#endif
}  // namespace detail


namespace detail {
/// Runs `f`; any exception other than CheckpointError (std::bad_alloc, std::length_error, a JSON error) becomes a
/// CheckpointError naming the file, so that callers that fall back past bad files see only the documented type.
template <class F>
auto documented_errors(const std::filesystem::path& file, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    fail(file, policytrain::detail::format("unreadable: {}", e.what()));
  }
}
}  // namespace detail

/// Reads and validates the header and metadata only (cheap: used to rank the files of a directory).
POLICYTRAIN_DECL nlohmann::json read_meta(const std::filesystem::path& file)
#if POLICYTRAIN_DEFINE
{
  return detail::documented_errors(file, [&] {
    const uint64_t size = detail::file_size_of(file);
    const std::string head = detail::read_bytes(file, 0, std::min<uint64_t>(kHeaderSize, size), size, "the header");
    const Header h = parse_header(file, head, size);
    return detail::parse_meta(file, detail::read_bytes(file, kHeaderSize, h.meta_size, size, "the metadata length"),
                              h.meta_crc);
  });
}
#else
;
#endif

/// The integer metadata field `key` of `file`, or `fallback` when absent; a field of another type is a
/// CheckpointError naming the file and the field (a forged or foreign file must not escape as a JSON error).
POLICYTRAIN_DECL int64_t meta_int(const std::filesystem::path& file, const nlohmann::json& meta, const char* key, int64_t fallback)
#if POLICYTRAIN_DEFINE
{
  const auto it = meta.find(key);
  if (it == meta.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) detail::bad_meta_field(file, key, *it, "an integer");
  return it->get<int64_t>();
}
#else
;
#endif
/// The boolean metadata field `key` of `file`, or `fallback` when absent (see meta_int).
POLICYTRAIN_DECL bool meta_bool(const std::filesystem::path& file, const nlohmann::json& meta, const char* key, bool fallback)
#if POLICYTRAIN_DEFINE
{
  const auto it = meta.find(key);
  if (it == meta.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) detail::bad_meta_field(file, key, *it, "a boolean (true or false)");
  return it->get<bool>();
}
#else
;
#endif

/// The string metadata field `key` of `file`, or `fallback` when absent (see meta_int).
POLICYTRAIN_DECL std::string meta_string(const std::filesystem::path& file, const nlohmann::json& meta, const char* key,
                               const std::string& fallback)
#if POLICYTRAIN_DEFINE
{
  const auto it = meta.find(key);
  if (it == meta.end() || it->is_null()) return fallback;
  if (!it->is_string()) detail::bad_meta_field(file, key, *it, "a string");
  return it->get<std::string>();
}
#else
;
#endif

/// A whole checkpoint file, validated: header, both checksums and length.
struct RawFile {
  /// The metadata.
  nlohmann::json meta;
  std::string bytes;        ///< the whole file
  /// Where the payload starts in `bytes`.
  size_t payload_offset = 0;
  /// The payload (the LibTorch archive bytes).
  std::string_view payload() const { return std::string_view(bytes).substr(payload_offset); }
};

/// Validates the bytes of a whole checkpoint file (`file` names it in messages); throws CheckpointError naming
/// the file and the problem. Every length is checked against `bytes.size()` before it is used.
POLICYTRAIN_DECL RawFile parse_file(const std::filesystem::path& file, std::string bytes)
#if POLICYTRAIN_DEFINE
{
  return detail::documented_errors(file, [&] {
    RawFile r;
    r.bytes = std::move(bytes);
    const uint64_t size = r.bytes.size();
    const std::string_view all(r.bytes);
    const Header h = parse_header(file, all.substr(0, std::min<size_t>(kHeaderSize, all.size())), size);
    // parse_header guarantees kHeaderSize + meta_size + payload_size == size.
    r.meta = detail::parse_meta(file, all.substr(kHeaderSize, h.meta_size), h.meta_crc);
    r.payload_offset = kHeaderSize + h.meta_size;
    if (detail::crc32(r.payload()) != h.payload_crc)
      detail::fail(file, "the payload is corrupt (its checksum does not match: flipped bytes or a partial write)");
    return r;
  });
}
#else
;
#endif

/// Reads `file` and validates it byte for byte; throws CheckpointError naming the file and the problem.
POLICYTRAIN_DECL RawFile read_file(const std::filesystem::path& file)
#if POLICYTRAIN_DEFINE
{
  return detail::documented_errors(file, [&] {
    const uint64_t size = detail::file_size_of(file);
    std::string bytes = detail::read_bytes(file, 0, size, size, "the file");
    if (bytes.size() != size) detail::fail(file, "the file changed while it was read");
    return parse_file(file, std::move(bytes));
  });
}
#else
;
#endif

namespace detail {
/// The temporary file an atomic write of `name` (a file name) goes through before its rename: `.<name>.tmp-<pid>`.
inline std::string temporary_name(std::string_view name, long pid) { return policytrain::detail::format(".{}.tmp-{}", name, pid); }
/// Whether `name` is such a temporary file (a killed write's leftover, never a complete file).
inline bool is_temporary_name(std::string_view n) { return n.starts_with(".") && n.find(".tmp-") != std::string_view::npos; }
}  // namespace detail
/// A file written in full to its temporary name (fsynced) and not yet renamed over its target: the first half of
/// write_atomic, so that several files are written before any of them replaces its previous version (a best save
/// commits best.ckpt and best.pt together, or neither). Destroyed uncommitted, it removes the temporary file.
class StagedFile {
 public:
  StagedFile() = default;
  /// Writes the concatenation of `pieces` to `file`'s temporary name and fsyncs it. On failure the temporary file
  /// is removed and CheckpointError names `file` and the system's reason; `file` is left as it was.
  POLICYTRAIN_DECL StagedFile(const std::filesystem::path& file, std::initializer_list<std::string_view> pieces);
  /// Takes over `o`'s temporary file; `o` is left empty.
  StagedFile(StagedFile&& o) noexcept : file_(std::move(o.file_)), tmp_(std::move(o.tmp_)) { o.tmp_.clear(); }
  /// Removes this one's uncommitted temporary file, then takes over `o`'s; `o` is left empty.
  StagedFile& operator=(StagedFile&& o) noexcept {
    if (this != &o) {
      discard();
      file_ = std::move(o.file_);
      tmp_ = std::move(o.tmp_);
      o.tmp_.clear();
    }
    return *this;
  }
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  ~StagedFile() { discard(); }
  /// Renames the temporary file over the target and fsyncs the directory. Throws CheckpointError naming the file.
  POLICYTRAIN_DECL void commit();
  /// The target.
  const std::filesystem::path& file() const { return file_; }

 private:
  void discard() noexcept {
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
    tmp_.clear();
  }
  std::filesystem::path file_, tmp_;  // tmp_ empty: nothing staged (committed, moved from, or default)
};

#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL StagedFile::StagedFile(const std::filesystem::path& file, std::initializer_list<std::string_view> pieces)
    : file_(file) {
  namespace fs = std::filesystem;
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  const fs::path tmp = dir / detail::temporary_name(file.filename().string(), static_cast<long>(::getpid()));
  auto fail_errno = [&](const char* while_doing, int err) {
    ::unlink(tmp.c_str());
    detail::fail(file, policytrain::detail::format("cannot write: {} ({}, temporary file {}); the previous file, if any, is unchanged; "
                                   "free disk space or check the directory's permissions and limits",
                                   std::strerror(err), while_doing, tmp.string()));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    detail::fail(file, policytrain::detail::format("cannot write: {} (creating the temporary file {}); the previous file, if any, is "
                                   "unchanged; check that the directory exists and is writable",
                                   std::strerror(err), tmp.string()));
  }
  for (std::string_view piece : pieces) {
    const char* p = piece.data();
    size_t left = piece.size();
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::close(fd);
        fail_errno("writing", err);
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail_errno("fsync", err);
  }
  if (::close(fd) != 0) fail_errno("close", errno);
  tmp_ = tmp;
}

POLICYTRAIN_DECL void StagedFile::commit() {
  namespace fs = std::filesystem;
  if (tmp_.empty()) return;
  const fs::path tmp = std::exchange(tmp_, fs::path());
  const fs::path dir = file_.has_parent_path() ? file_.parent_path() : fs::path(".");
  if (::rename(tmp.c_str(), file_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    detail::fail(file_, policytrain::detail::format("cannot write: {} (rename, temporary file {}); the previous file, if any, is "
                                    "unchanged; check the directory's permissions", std::strerror(err), tmp.string()));
  }
  // The rename is durable only once the directory entry is. The new file is in place; what failed is the
  // guarantee that it survives a power loss, which the caller must hear about.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    const int err = errno;
    detail::fail(file_, policytrain::detail::format("written, but the directory {} cannot be opened to make the rename durable: {}",
                                    dir.string(), std::strerror(err)));
  }
  if (::fsync(dfd) != 0) {
    const int err = errno;
    ::close(dfd);
    detail::fail(file_, policytrain::detail::format("written, but the fsync of the directory {} failed: {}; the rename may not survive "
                                    "a crash or power loss", dir.string(), std::strerror(err)));
  }
  ::close(dfd);
}
#endif

/// Writes the concatenation of `pieces` to `file` atomically (temporary file in the same directory, fsync,
/// rename, fsync of the directory). On failure the temporary file is removed, `file` is left as it was, and
/// CheckpointError names the file and the system's reason.
POLICYTRAIN_DECL void write_atomic(const std::filesystem::path& file, std::initializer_list<std::string_view> pieces)
#if POLICYTRAIN_DEFINE
{
  StagedFile(file, pieces).commit();
}
#else
;
#endif

/// Stages a checkpoint file (header, `meta`, `payload`; see write_file) without committing it. Throws
/// CheckpointError, writing nothing, when the metadata exceeds what a reader accepts or the write fails.
POLICYTRAIN_DECL StagedFile stage_file(const std::filesystem::path& file, const nlohmann::json& meta, std::string_view payload)
#if POLICYTRAIN_DEFINE
{
  const std::string m = meta.dump();
  detail::check_meta_bounds(file, m);
  const std::string h = make_header(m, payload);
  return StagedFile(file, {h, m, payload});
}
#else
;
#endif

/// Writes a checkpoint file: header, `meta` (a JSON object) and `payload`, atomically.
/// Throws CheckpointError, writing nothing, when the metadata exceeds what a reader accepts (kMaxMetaBytes,
/// kMaxMetaDepth).
POLICYTRAIN_DECL void write_file(const std::filesystem::path& file, const nlohmann::json& meta, std::string_view payload)
#if POLICYTRAIN_DEFINE
{
  stage_file(file, meta, payload).commit();
}
#else
;
#endif

}  // namespace policytrain::checkpoint
