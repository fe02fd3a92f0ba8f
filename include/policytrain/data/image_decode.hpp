#pragma once
/// \file
/// PNG and JPEG decoding to 8-bit RGB, torch-free (data/image_folder.hpp builds on it): libpng's simplified API and
/// libjpeg(-turbo), from Debian's libpng-dev and libjpeg62-turbo-dev. Opt-in: include it (or image_folder.hpp) and
/// link policytrain::images (CMake component `images`), which brings both libraries; the core needs neither.
/// Why these: the reference decoders, the ones Pillow and torchvision build on, kept by their projects and by Debian;
/// a PNG decodes to the same pixels as Pillow's `Image.open(f).convert("RGB")` (8-bit gray, gray+alpha, RGB, RGBA
/// and palette images: alpha is dropped, as Pillow drops it), a JPEG to libjpeg's integer IDCT output (Pillow's,
/// within a unit per channel where its libjpeg-turbo differs).
/// Every malformed input is an ImageError that names the file: a bad signature, a corrupt or truncated stream (a
/// JPEG that libjpeg would finish with grey, with only a warning, is an error here), an unsupported colour space
/// (CMYK JPEG), an image larger than `max_pixels`. Fuzzed: fuzz/fuzz_image.cpp.
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <jpeglib.h>
#include <png.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// An image that cannot be decoded: the message names the file and the problem.
class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Decoded pixels: height x width x 3 bytes, RGB, row-major.
struct RgbImage {
  /// Rows of pixels.
  int64_t height = 0, width = 0;  ///< columns of pixels (width)
  std::vector<uint8_t> pixels;    ///< height x width x 3 bytes, RGB, row-major
};

/// Images above this many pixels are refused (a header may claim any size).
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

/// Decodes a PNG held in memory; `file` names it in messages. Throws ImageError.
inline RgbImage decode_png(std::string_view bytes, const std::string& file, int64_t max_pixels = kMaxImagePixels) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  auto fail = [&](const std::string& what) -> ImageError {
    png_image_free(&img);
    return ImageError(policytrain::detail::error_message("policytrain::data::decode_png", file + ": " + what));
  };
  if (!png_image_begin_read_from_memory(&img, bytes.data(), bytes.size()))
    throw fail(std::string("not a readable PNG (") + img.message + ")");
  if (static_cast<int64_t>(img.width) * static_cast<int64_t>(img.height) > max_pixels)
    throw fail("the image is " + std::to_string(img.width) + "x" + std::to_string(img.height) + " pixels; expected at most " +
               std::to_string(max_pixels));
  // RGBA, then the alpha dropped: Pillow's convert("RGB") drops alpha, where libpng's RGB output would composite.
  img.format = PNG_FORMAT_RGBA;
  std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, rgba.data(), 0, nullptr))
    throw fail(std::string("corrupt or truncated (") + img.message + ")");
  RgbImage out{static_cast<int64_t>(img.height), static_cast<int64_t>(img.width), {}};
  out.pixels.resize(static_cast<size_t>(out.height * out.width * 3));
  for (size_t p = 0, n = static_cast<size_t>(out.height * out.width); p < n; ++p)
    for (size_t c = 0; c < 3; ++c) out.pixels[p * 3 + c] = rgba[p * 4 + c];
  png_image_free(&img);
  return out;
}

namespace detail {
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};
inline void jpeg_fail(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}
/// A warning (a truncated stream that libjpeg would pad with grey, corrupt data it would skip) is an error here.
inline void jpeg_message(j_common_ptr c, int level) {
  if (level < 0) jpeg_fail(c);
}
}  // namespace detail

namespace detail {
/// The libjpeg part of decode_jpeg: between setjmp and a longjmp back to it, only `out`'s heap contents and the
/// error record change (no local of this frame), so nothing is left indeterminate. Returns "" or the problem.
inline std::string jpeg_decode_into(jpeg_decompress_struct& cinfo, JpegError& err, std::string_view bytes,
                                    int64_t max_pixels, RgbImage& out) {
  if (setjmp(err.jump)) return std::string("corrupt or truncated (") + err.message + ")";
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space != JCS_GRAYSCALE && cinfo.jpeg_color_space != JCS_YCbCr && cinfo.jpeg_color_space != JCS_RGB)
    return "its colour space (CMYK or YCCK) is not supported; expected a grayscale or colour (YCbCr, RGB) JPEG";
  if (static_cast<int64_t>(cinfo.image_width) * static_cast<int64_t>(cinfo.image_height) > max_pixels)
    return "the image is " + std::to_string(cinfo.image_width) + "x" + std::to_string(cinfo.image_height) +
           " pixels; expected at most " + std::to_string(max_pixels);
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  out.height = cinfo.output_height;
  out.width = cinfo.output_width;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * 3));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.pixels.data() + static_cast<size_t>(cinfo.output_scanline) * static_cast<size_t>(out.width) * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  return {};
}
}  // namespace detail

/// Decodes a JPEG held in memory; `file` names it in messages. Throws ImageError.
inline RgbImage decode_jpeg(std::string_view bytes, const std::string& file, int64_t max_pixels = kMaxImagePixels) {
  jpeg_decompress_struct cinfo{};
  detail::JpegError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = detail::jpeg_fail;
  err.mgr.emit_message = detail::jpeg_message;
  RgbImage out;
  const std::string problem = detail::jpeg_decode_into(cinfo, err, bytes, max_pixels, out);
  jpeg_destroy_decompress(&cinfo);
  if (!problem.empty())
    throw ImageError(policytrain::detail::error_message("policytrain::data::decode_jpeg", file + ": " + problem));
  return out;
}

/// Decodes a PNG or a JPEG by its signature (not its name). Throws ImageError naming `file`.
inline RgbImage decode_image(std::string_view bytes, const std::string& file, int64_t max_pixels = kMaxImagePixels) {
  if (bytes.size() >= 8 && bytes.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) return decode_png(bytes, file, max_pixels);
  if (bytes.size() >= 3 && bytes.substr(0, 3) == std::string_view("\xff\xd8\xff", 3)) return decode_jpeg(bytes, file, max_pixels);
  throw ImageError(policytrain::detail::error_message(
      "policytrain::data::decode_image",
      file + ": " + (bytes.empty() ? "the file is empty" : "neither a PNG nor a JPEG signature"),
      "a PNG or JPEG image"));
}

/// Reads and decodes an image file. Throws ImageError naming the file.
inline RgbImage read_image(const std::string& file, int64_t max_pixels = kMaxImagePixels) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw ImageError(policytrain::detail::error_message("policytrain::data::read_image", file + ": cannot be opened",
                                                        "a readable image file"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  return decode_image(bytes, file, max_pixels);
}

}  // namespace policytrain::data
