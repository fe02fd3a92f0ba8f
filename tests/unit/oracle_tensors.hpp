#pragma once
// The tensor files the Python oracles (tests/integration/ddp_oracle.py, zero_oracle.py) and their C++ sides
// exchange: a directory with manifest.json (name -> dtype, shape, file) and one raw little-endian file per tensor.
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace testing::oracle {

/// Tensors by name.
using Tensors = std::map<std::string, torch::Tensor>;

/// Reads a directory written by the oracles' save_tensors (float32 and int64 tensors).
inline Tensors load_tensors(const std::filesystem::path& dir) {
  std::ifstream mf(dir / "manifest.json");
  if (!mf) throw std::runtime_error("no manifest.json in " + dir.string());
  const auto manifest = nlohmann::json::parse(mf);
  Tensors out;
  for (const auto& [name, e] : manifest.items()) {
    std::vector<int64_t> shape = e["shape"].get<std::vector<int64_t>>();
    const auto dtype = e["dtype"] == "float32" ? torch::kFloat : torch::kLong;
    auto t = torch::empty(shape, dtype);
    std::ifstream f(dir / e["file"].get<std::string>(), std::ios::binary);
    f.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
    if (!f) throw std::runtime_error("short file for " + name + " in " + dir.string());
    out[name] = t;
  }
  return out;
}

/// Writes `tensors` in the same format (floating point as float32, the rest as int64).
inline void save_tensors(const std::filesystem::path& dir, const Tensors& tensors) {
  std::filesystem::create_directories(dir);
  nlohmann::json manifest = nlohmann::json::object();
  int i = 0;
  for (const auto& [name, t0] : tensors) {
    auto t = t0.detach().to(torch::kCPU).contiguous();
    t = t.is_floating_point() ? t.to(torch::kFloat) : t.to(torch::kLong);
    const std::string file = std::to_string(i++) + ".bin";
    std::ofstream f(dir / file, std::ios::binary);
    f.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
    manifest[name] = {{"dtype", t.is_floating_point() ? "float32" : "int64"}, {"shape", t.sizes().vec()}, {"file", file}};
  }
  std::ofstream(dir / "manifest.json") << manifest.dump();
}

}  // namespace testing::oracle
