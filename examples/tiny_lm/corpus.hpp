#pragma once
// tiny_lm's data: a text corpus made into nanoGPT's token files. Byte-level tokens (ids 0-255, one per byte of the
// text), written as uint16 (nanoGPT's .bin layout: the ids one after the other, little endian, no header), the first
// 90% of the text train.bin and the rest val.bin, as nanoGPT's prepare.py for shakespeare_char splits.
// The default corpus is Debian's `fortunes` package (/usr/share/games/fortunes: the BSD fortune-cookie database,
// 2.6 MB of English text; scripts/setup installs it): every plain file of the folder, in name order.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace tiny_lm {

/// Where Debian's `fortunes` package puts its text.
inline std::filesystem::path default_corpus() { return "/usr/share/games/fortunes"; }

/// The text of `corpus`: a file, or a folder's plain files in name order (strfile's .dat indexes and links left out).
inline std::string read_corpus(const std::filesystem::path& corpus) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (fs::is_regular_file(corpus)) {
    files.push_back(corpus);
  } else if (fs::is_directory(corpus)) {
    for (const auto& e : fs::directory_iterator(corpus))
      if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat") files.push_back(e.path());
    std::sort(files.begin(), files.end());
  }
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (text.size() < 1024)
    throw std::invalid_argument("tiny_lm: the corpus '" + corpus.string() + "' holds " + std::to_string(text.size()) +
                                " bytes of text; expected a text file or a folder of them (at least 1 KiB). Install "
                                "Debian's fortunes package (scripts/setup does) or give --corpus a text file");
  return text;
}

/// Writes `bytes` as uint16 token ids to `file`, through a temporary file renamed into place (ranks that prepare the
/// same data at once each write a whole file).
inline void write_tokens(const std::filesystem::path& file, const std::string& bytes) {
  std::vector<uint16_t> ids(bytes.size());
  std::transform(bytes.begin(), bytes.end(), ids.begin(), [](char c) { return static_cast<uint8_t>(c); });
  const auto tmp = file.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(uint16_t)));
    if (!out) throw std::runtime_error("tiny_lm: cannot write the token file '" + tmp + "'; check the --data folder");
  }
  std::filesystem::rename(tmp, file);
}

/// data/train.bin and data/val.bin from the corpus, unless both are there already. Returns the corpus' size in bytes
/// (0 when the files were there).
inline int64_t prepare_tokens(const std::filesystem::path& corpus, const std::filesystem::path& data) {
  if (std::filesystem::exists(data / "train.bin") && std::filesystem::exists(data / "val.bin")) return 0;
  const std::string text = read_corpus(corpus);
  std::filesystem::create_directories(data);
  const size_t n = text.size() * 9 / 10;
  write_tokens(data / "train.bin", text.substr(0, n));
  write_tokens(data / "val.bin", text.substr(n));
  return static_cast<int64_t>(text.size());
}

}  // namespace tiny_lm
