// libFuzzer target: the PNG and JPEG decoders (data/image_decode.hpp: libpng's classic API, libjpeg). The only
// allowed failure is ImageError; what comes back is height * width * 3 bytes. -malloc_limit_mb bounds what a header
// may make it allocate (decode_image refuses images above its max_pixels, here 4 Mpx).
// With POLICYTRAIN_FUZZ_SEEDS=<dir> set, writes a seed corpus (small PNGs and JPEGs, made by libpng's and libjpeg's
// encoders) there and exits.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <policytrain/data/image_decode.hpp>

namespace {
void spit(const std::string& path, const std::string& s) { std::ofstream(path, std::ios::binary) << s; }
/// A small PNG of `format` (libpng's simplified writer) and a small JPEG of `components` (libjpeg's compressor).
std::string png_of(uint32_t format, int w, int h) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(w);
  img.height = static_cast<png_uint_32>(h);
  img.format = format;
  std::string px(PNG_IMAGE_SIZE(img), '\0');
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<char>(i * 37);
  png_alloc_size_t n = 0;
  png_image_write_to_memory(&img, nullptr, &n, 0, px.data(), 0, nullptr);
  std::string out(n, '\0');
  png_image_write_to_memory(&img, out.data(), &n, 0, px.data(), 0, nullptr);
  out.resize(n);
  return out;
}
std::string jpeg_of(int components, int w, int h) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long n = 0;
  jpeg_mem_dest(&c, &buf, &n);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = components;
  c.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_start_compress(&c, TRUE);
  std::string row(static_cast<size_t>(w * components), '\0');
  while (c.next_scanline < c.image_height) {
    for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<char>(i * 11 + c.next_scanline * 7);
    JSAMPROW r = reinterpret_cast<JSAMPROW>(row.data());
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  std::string out(reinterpret_cast<char*>(buf), n);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}
void make_seeds(const std::string& dir) {
  spit(dir + "/rgb.png", png_of(PNG_FORMAT_RGB, 5, 3));
  spit(dir + "/rgba.png", png_of(PNG_FORMAT_RGBA, 4, 4));
  spit(dir + "/gray.png", png_of(PNG_FORMAT_GRAY, 3, 7));
  spit(dir + "/rgba16.png", png_of(PNG_FORMAT_LINEAR_RGB_ALPHA, 3, 2));
  spit(dir + "/gray16.png", png_of(PNG_FORMAT_LINEAR_Y, 2, 5));
  spit(dir + "/rgb.jpg", jpeg_of(3, 16, 9));
  spit(dir + "/gray.jpg", jpeg_of(1, 8, 8));
  spit(dir + "/cmyk.jpg", jpeg_of(4, 9, 5));
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* d = std::getenv("POLICYTRAIN_FUZZ_SEEDS")) {
    make_seeds(d);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto img = policytrain::data::decode_image(std::string_view(reinterpret_cast<const char*>(data), size),
                                                     "<fuzz>", int64_t{1} << 22);
    if (img.height <= 0 || img.width <= 0 || img.pixels.size() != static_cast<size_t>(img.height * img.width * 3))
      std::abort();
  } catch (const policytrain::data::ImageError&) {
  }
  return 0;
}
