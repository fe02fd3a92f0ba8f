// The C++ side of the image differential tests (tests/differential/images.py, transforms.py): runs the library on
// a list of inputs and writes what it made, for the Python driver to compare with Pillow and torchvision.
//   image_probe decode LIST OUTDIR     LIST: one file a line. For line i, data::read_image's bytes go to OUTDIR/i.rgb
//                                      and stdout gets "i ok WIDTH HEIGHT", or "i error MESSAGE".
//   image_probe transform LIST OUTDIR  LIST: "ROOT RESIZE CROP MEAN0 MEAN1 MEAN2 STD0 STD1 STD2" a line. For line i,
//                                      sample 0 of data::ImageFolder(ROOT, those options) goes to OUTDIR/i.f32 (float32,
//                                      channels x height x width) and stdout gets "i ok C H W", or "i error MESSAGE".
#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <policytrain/data/image_folder.hpp>

namespace {
void write_bytes(const std::string& path, const void* data, size_t n) {
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 4 ? argv[1] : "";
  if (mode != "decode" && mode != "transform") {
    std::cerr << "usage: image_probe decode|transform LIST OUTDIR\n";
    return 2;
  }
  std::ifstream list(argv[2]);
  const std::string outdir = argv[3];
  std::string line;
  for (int i = 0; std::getline(list, line); ++i) {
    try {
      if (mode == "decode") {
        const auto img = policytrain::data::read_image(line);
        write_bytes(outdir + "/" + std::to_string(i) + ".rgb", img.pixels.data(), img.pixels.size());
        std::cout << i << " ok " << img.width << " " << img.height << "\n";
      } else {
        std::istringstream in(line);
        std::string root;
        policytrain::data::ImageFolderOptions o;
        in >> root >> o.resize >> o.crop >> o.mean[0] >> o.mean[1] >> o.mean[2] >> o.std[0] >> o.std[1] >> o.std[2];
        const auto x = policytrain::data::ImageFolder(root, o).get(0).data.contiguous();
        write_bytes(outdir + "/" + std::to_string(i) + ".f32", x.data_ptr<float>(), static_cast<size_t>(x.numel()) * 4);
        std::cout << i << " ok " << x.size(0) << " " << x.size(1) << " " << x.size(2) << "\n";
      }
    } catch (const std::exception& e) {
      std::cout << i << " error " << one_line(e.what()) << "\n";
    }
  }
  return 0;
}
