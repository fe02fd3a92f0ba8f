// Image files (policytrain::images): PNG and JPEG decoded as Pillow decodes them, ImageFolder's classes and samples
// as torchvision's ImageFolder orders them, malformed files as errors naming the file, and the decoding in
// LibTorch's DataLoader workers (data::from_torch). The oracle: tests/integration/make_images.py (Pillow).
#include <torch/torch.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include <policytrain/data/from_torch.hpp>
#include <policytrain/data/image_folder.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {
/// The tree make_images.py writes, once per process.
const fs::path& image_tree() {
  static const fs::path root = [] {
    const fs::path r = testing::temp_dir("images");
    const std::string cmd = std::string(POLICYTRAIN_BINARY_DIR) + "/venv-pillow/bin/python " + POLICYTRAIN_SOURCE_DIR +
                            "/tests/integration/make_images.py " + r.string() + " --per-class 5 > " + (r / "log.txt").string() + " 2>&1";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("make_images.py failed: " + testing::read_text(r / "log.txt"));
    return r;
  }();
  return root;
}
nlohmann::json expected() { return nlohmann::json::parse(testing::read_text(image_tree() / "expected.json")); }
std::string bytes_of(const fs::path& p) { return testing::read_text(p); }
}  // namespace

TEST_CASE("decode_image: PNG pixels equal Pillow's exactly, JPEG within one unit per channel") {
  const auto ex = expected();
  int png = 0, jpeg = 0, jpeg_exact = 0;
  int max_jpeg_diff = 0;
  for (size_t i = 0; i < ex["samples"].size(); ++i) {
    const std::string file = ex["samples"][i][0];
    CAPTURE(file);
    const auto img = pt::data::read_image(file);
    const std::string want = bytes_of(image_tree() / "expected" / (std::to_string(i) + ".rgb"));
    CHECK(img.width == ex["sizes"][i][0].get<int64_t>());
    CHECK(img.height == ex["sizes"][i][1].get<int64_t>());
    REQUIRE(want.size() == img.pixels.size());
    if (!ex["jpeg"][i].get<bool>()) {
      ++png;
      CHECK(std::equal(want.begin(), want.end(), img.pixels.begin(),
                       [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; }));
    } else {
      ++jpeg;
      int worst = 0;
      for (size_t k = 0; k < want.size(); ++k)
        worst = std::max(worst, std::abs(static_cast<int>(static_cast<uint8_t>(want[k])) - static_cast<int>(img.pixels[k])));
      jpeg_exact += worst == 0;
      max_jpeg_diff = std::max(max_jpeg_diff, worst);
    }
  }
  MESSAGE(png, " PNG equal; ", jpeg, " JPEG, ", jpeg_exact, " of them equal, largest difference ", max_jpeg_diff);
  CHECK(png >= 10);
  CHECK(jpeg >= 6);
  CHECK(max_jpeg_diff <= 1);  // libjpeg's integer IDCT in both; Pillow's wheel bundles its own libjpeg-turbo
}

TEST_CASE("ImageFolder: classes and samples in torchvision's ImageFolder order, and a sample resized, cropped, normalised") {
  const auto ex = expected();
  pt::data::ImageFolder folder(image_tree() / "tree");
  CHECK(folder.classes() == ex["classes"].get<std::vector<std::string>>());
  REQUIRE(folder.samples().size() == ex["samples"].size());
  for (size_t i = 0; i < folder.samples().size(); ++i) {
    CHECK(folder.samples()[i].first == ex["samples"][i][0].get<std::string>());
    CHECK(folder.samples()[i].second == ex["samples"][i][1].get<int64_t>());
  }
  // A sample without resizing: the decoded pixels / 255, normalised per channel.
  pt::data::ImageFolder norm(image_tree() / "tree", {.mean = {0.5, 0.4, 0.3}, .std = {0.2, 0.25, 0.5}});
  const auto s = norm.get(2);
  const auto img = pt::data::read_image(folder.samples()[2].first);
  auto raw = torch::from_blob(const_cast<uint8_t*>(img.pixels.data()), {img.height, img.width, 3}, torch::kUInt8)
                 .permute({2, 0, 1}).to(torch::kFloat32) / 255.0;
  auto want = (raw - torch::tensor({0.5f, 0.4f, 0.3f}).view({3, 1, 1})) / torch::tensor({0.2f, 0.25f, 0.5f}).view({3, 1, 1});
  CHECK(torch::allclose(s.data, want, 0, 1e-6));
  CHECK(s.target.item<int64_t>() == folder.samples()[2].second);
  // Resize the shorter side to 24, crop 20x20 (torchvision's Resize(24) then CenterCrop(20) geometry), then a user
  // transform that flips the image horizontally and tags the label.
  pt::data::ImageFolder sized(image_tree() / "tree",
                              {.resize = 24, .crop = 20, .transform = [](torch::data::Example<> e) {
                                 return torch::data::Example<>{e.data.flip({2}), e.target + 100};
                               }});
  const auto r = sized.get(2);
  CHECK(r.data.sizes() == torch::IntArrayRef{3, 20, 20});
  CHECK(r.target.item<int64_t>() == folder.samples()[2].second + 100);
  namespace F = torch::nn::functional;
  const int64_t h = img.height, w = img.width;
  const std::vector<int64_t> to = h <= w ? std::vector<int64_t>{24, 24 * w / h} : std::vector<int64_t>{24 * h / w, 24};
  auto resized = F::interpolate(raw.unsqueeze(0), F::InterpolateFuncOptions().size(to).mode(torch::kBilinear)
                                                      .align_corners(false).antialias(true)).squeeze(0);
  // torchvision's corner, int(round((size - 20) / 2.0)): Python rounds a half to even, as nearbyint does.
  const auto top = static_cast<int64_t>(std::nearbyint((to[0] - 20) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint((to[1] - 20) / 2.0));
  CHECK(torch::allclose(r.data, resized.slice(1, top, top + 20).slice(2, left, left + 20).flip({2}), 0, 1e-6));
}

TEST_CASE("ImageFolder::crop_start: torchvision's centre crop corner, a half rounded to even") {
  // A 640x480 photo resized to 256 (341x256) and cropped to 224: 117 / 2 = 58.5, column 58 (not 59); 32 / 2 = 16.
  CHECK(pt::data::ImageFolder::crop_start(341, 224) == 58);
  CHECK(pt::data::ImageFolder::crop_start(256, 224) == 16);
  for (int64_t d = 0; d < 40; ++d) CHECK(pt::data::ImageFolder::crop_start(100 + d, 100) == static_cast<int64_t>(std::nearbyint(d / 2.0)));
}

TEST_CASE("decode_image: a corrupt or truncated file is an ImageError naming the file") {
  const fs::path bad = image_tree() / "bad";
  auto error_of = [&](const char* name) -> std::string {
    try {
      pt::data::read_image((bad / name).string());
    } catch (const pt::data::ImageError& e) {
      return e.what();
    }
    return "(no error)";
  };
  for (const char* name : {"truncated.png", "corrupt.png", "truncated.jpg", "corrupt.jpg", "text.jpg"}) {
    CAPTURE(name);
    const std::string msg = error_of(name);
    CHECK(msg.find((bad / name).string()) != std::string::npos);
    CHECK(msg.rfind("policytrain::data::", 0) == 0);
  }
  CHECK(error_of("text.jpg") == "policytrain::data::decode_image: " + (bad / "text.jpg").string() +
                                    ": neither a PNG nor a JPEG signature; expected a PNG or JPEG image");
  CHECK(error_of("truncated.jpg").find("corrupt or truncated") != std::string::npos);
  CHECK(error_of("truncated.png").find("corrupt or truncated") != std::string::npos);
  // Inside a DataLoader worker, the error reaches the Trainer's thread with the file's name.
  const fs::path tree = testing::temp_dir("images_bad_tree");
  fs::create_directories(tree / "a");
  fs::copy_file(bad / "truncated.jpg", tree / "a" / "x.jpg");
  auto loader = pt::data::from_torch(pt::data::ImageFolder(tree).map(torch::data::transforms::Stack<>()),
                                     torch::data::samplers::SequentialSampler(1),
                                     torch::data::DataLoaderOptions().batch_size(1).workers(2));
  std::string msg;
  try {
    for (auto& b : loader) (void)b;
  } catch (const std::exception& e) {
    msg = e.what();
  }
  CHECK(msg.find((tree / "a" / "x.jpg").string()) != std::string::npos);
}

TEST_CASE("ImageFolder through from_torch: 2 workers decode every image once per epoch, as the main thread does") {
  pt::data::ImageFolder folder(image_tree() / "tree", {.resize = 16, .crop = 16});
  const auto n = static_cast<int64_t>(*folder.size());
  auto ds = [&] { return pt::data::ImageFolder(image_tree() / "tree", {.resize = 16, .crop = 16}).map(torch::data::transforms::Stack<>()); };
  auto workers = pt::data::from_torch(ds(), torch::data::samplers::SequentialSampler(static_cast<size_t>(n)),
                                      torch::data::DataLoaderOptions().batch_size(4).workers(2));
  std::vector<torch::Tensor> xs, ys;
  for (auto& b : workers) xs.push_back(b.data), ys.push_back(b.target);
  const auto x = torch::cat(xs), y = torch::cat(ys);
  REQUIRE(x.size(0) == n);
  for (int64_t i = 0; i < n; ++i) {
    const auto s = folder.get(static_cast<size_t>(i));
    CHECK(torch::equal(x[i], s.data));
    CHECK(y[i].item<int64_t>() == s.target.item<int64_t>());
  }
}
