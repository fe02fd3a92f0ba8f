// The images component from outside the tree: decodes a 2x1 PNG written here by libpng itself (through
// policytrain::images' link), and reports a file that is not an image as data::ImageError naming it.
#include <cstdio>
#include <string>

#include <png.h>

#include <policytrain/data/image_decode.hpp>

int main() {
  // A 2x1 RGB PNG: pixels (10, 20, 30) and (200, 100, 0), written with libpng's simplified API.
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = 2;
  img.height = 1;
  img.format = PNG_FORMAT_RGB;
  const unsigned char pixels[6] = {10, 20, 30, 200, 100, 0};
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&img, nullptr, &size, 0, pixels, 0, nullptr)) return 2;
  std::string bytes(size, '\0');
  if (!png_image_write_to_memory(&img, bytes.data(), &size, 0, pixels, 0, nullptr)) return 2;
  const auto rgb = policytrain::data::decode_image(bytes, "memory.png");
  if (rgb.width != 2 || rgb.height != 1 || std::string(rgb.pixels.begin(), rgb.pixels.end()) !=
                                               std::string(reinterpret_cast<const char*>(pixels), 6)) {
    std::fprintf(stderr, "consumer_images: decoded %lldx%lld, expected the 2x1 PNG's pixels\n",
                 static_cast<long long>(rgb.width), static_cast<long long>(rgb.height));
    return 1;
  }
  try {
    policytrain::data::decode_image("not an image", "bad.bin");
    std::fprintf(stderr, "consumer_images: bytes that are not an image were decoded\n");
    return 1;
  } catch (const policytrain::data::ImageError& e) {
    if (std::string(e.what()).find("bad.bin") == std::string::npos) return 1;
  }
  std::puts("consumer_images: ok");
  return 0;
}
