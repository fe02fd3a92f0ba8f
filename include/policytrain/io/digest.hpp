#pragma once
/// \file
/// SHA-256, the library's one digest (OpenSSL's libcrypto): io::Sha256 (incremental), io::sha256_hex (of bytes),
/// and io::params_sha256 (of a module's parameters and buffers: names, shapes, dtypes and bytes, in registration
/// order, so two runs can be compared exactly). The run fingerprint's architecture digest
/// (checkpoint/run_identity.hpp) is built on it too.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::io {

/// Incremental SHA-256: `update` with bytes, any number of times, then `hex` once.
class Sha256 {
 public:
  /// Throws std::runtime_error when OpenSSL's SHA-256 cannot be set up.
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  /// Feeds `n` bytes at `data`.
  void update(const void* data, size_t n);
  /// Feeds the bytes of `s`.
  void update(std::string_view s) { update(s.data(), s.size()); }
  /// The digest of everything fed, as 64 lowercase hex digits; call once.
  std::string hex();

 private:
  EVP_MD_CTX* ctx_ = nullptr;
};

/// Hex SHA-256 of `bytes`.
inline std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex();
}

/// Hex SHA-256 over every named parameter and buffer of `m`.
POLICYTRAIN_DECL std::string params_sha256(const torch::nn::Module& m)
#if POLICYTRAIN_DEFINE
{
  Sha256 h;
  auto feed = [&](const std::string& name, const torch::Tensor& t) {
    auto c = t.detach().to(torch::kCPU).contiguous();
    h.update(name + "|" + c10::str(c.sizes()) + "|" + std::string(c.dtype().name()) + "|");
    h.update(c.data_ptr(), c.numel() * c.element_size());
  };
  for (const auto& p : m.named_parameters(true)) feed(p.key(), p.value());
  for (const auto& b : m.named_buffers(true)) feed(b.key(), b.value());
  return h.hex();
}
#else
;
#endif

#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    throw std::runtime_error(
        policytrain::detail::error_message("policytrain::io::Sha256",
                                           "OpenSSL's SHA-256 is unavailable (EVP_DigestInit_ex failed); "
                                           "link a libcrypto that provides it"));
  }
}

POLICYTRAIN_DECL Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

POLICYTRAIN_DECL void Sha256::update(const void* data, size_t n) {
  if (n > 0 && EVP_DigestUpdate(ctx_, data, n) != 1)
    throw std::runtime_error(policytrain::detail::error_message(
        "policytrain::io::Sha256", policytrain::detail::format("EVP_DigestUpdate of {} bytes failed", n)));
}

POLICYTRAIN_DECL std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (EVP_DigestFinal_ex(ctx_, md, &len) != 1)
    throw std::runtime_error(
        policytrain::detail::error_message("policytrain::io::Sha256", "EVP_DigestFinal_ex failed"));
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned i = 0; i < len; ++i) hex += policytrain::detail::format("{:02x}", md[i]);
  return hex;
}
#endif

}  // namespace policytrain::io
