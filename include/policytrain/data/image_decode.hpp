#pragma once
/// \file
/// PNG and JPEG decoding to 8-bit RGB, torch-free (data/image_folder.hpp builds on it): libpng's classic API and
/// libjpeg(-turbo), from Debian's libpng-dev and libjpeg62-turbo-dev. Opt-in: include it (or image_folder.hpp) and
/// link policytrain::images (CMake component `images`), which brings both libraries; the core needs neither.
/// Why these: the reference decoders, the ones Pillow and torchvision build on, kept by their projects and by Debian.
/// What it matches: Pillow's `Image.open(f).convert("RGB")`, which torchvision's ImageFolder loader returns. A PNG
/// of any colour type and bit depth decodes to the same bytes (decode_png says how each is converted; no gamma, no
/// colour profile, alpha dropped), a JPEG to libjpeg's integer IDCT output (Pillow's, within a unit per channel
/// where Pillow's libjpeg-turbo differs: docs/your-data.md has the measured difference), CMYK converted as Pillow
/// converts it. tests/differential/images.py compares both with Pillow on seeded random files.
/// Every malformed input is an ImageError that names the file: a bad signature, a corrupt or truncated stream (a
/// JPEG that libjpeg would finish with grey, with only a warning, is an error here), an image larger than
/// `max_pixels`. Fuzzed: fuzz/fuzz_image.cpp.
#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
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

namespace detail {
/// What libpng's callbacks share: the bytes being read, and the message of the error that ends the read.
struct PngSource {
  std::string_view bytes;
  size_t pos = 0;
  std::string message;
};
inline void png_fail(png_structp png, png_const_charp message) {
  static_cast<PngSource*>(png_get_error_ptr(png))->message = message;
  png_longjmp(png, 1);
}
/// libpng's warnings (an ancillary chunk it drops: a bad iCCP profile, a bad CRC) do not change the pixels, and
/// Pillow reads such files without a word: silent.
inline void png_warn(png_structp, png_const_charp) {}
inline void png_read_bytes(png_structp png, png_bytep out, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->bytes.size() - src->pos) png_error(png, "the file ends early");
  std::memcpy(out, src->bytes.data() + src->pos, n);
  src->pos += n;
}
/// What png_decode_into leaves for decode_png: the IHDR fields, the palette, and the rows as stored (samples of 1 to
/// 7 bits widened to a byte each, 16-bit samples big-endian), interlacing undone.
struct PngRaw {
  png_uint_32 width = 0, height = 0;
  int depth = 0, colour_type = 0, channels = 0;
  size_t row_bytes = 0;
  std::vector<uint8_t> rows;
  std::vector<png_bytep> row_pointers;
  std::vector<png_color> palette;
};
/// The libpng part of decode_png, with the classic API and no transformation but unpacking and de-interlacing (no
/// gamma, no colour management, no 16-to-8 scaling: Pillow applies none). Between setjmp and a longjmp back to it,
/// only `raw`'s and `src`'s contents change (no local of this frame is read after it). Returns "" or the problem.
inline std::string png_decode_into(png_structp png, png_infop info, PngSource& src, int64_t max_pixels, PngRaw& raw) {
  if (setjmp(png_jmpbuf(png))) return "corrupt or truncated (" + src.message + ")";
  png_set_read_fn(png, &src, png_read_bytes);
  png_read_info(png, info);
  int interlace = 0;
  png_get_IHDR(png, info, &raw.width, &raw.height, &raw.depth, &raw.colour_type, &interlace, nullptr, nullptr);
  if (static_cast<int64_t>(raw.width) * static_cast<int64_t>(raw.height) > max_pixels)
    return "the image is " + std::to_string(raw.width) + "x" + std::to_string(raw.height) +
           " pixels; expected at most " + std::to_string(max_pixels);
  if (raw.colour_type == PNG_COLOR_TYPE_PALETTE) {
    png_colorp colours = nullptr;
    int n = 0;
    if (png_get_PLTE(png, info, &colours, &n) == 0) return "a palette image without a palette (PLTE chunk)";
    raw.palette.assign(colours, colours + n);
  }
  if (raw.depth < 8) png_set_packing(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  raw.channels = png_get_channels(png, info);
  raw.row_bytes = png_get_rowbytes(png, info);
  raw.rows.resize(raw.row_bytes * raw.height);
  raw.row_pointers.resize(raw.height);
  for (size_t y = 0; y < raw.height; ++y) raw.row_pointers[y] = raw.rows.data() + y * raw.row_bytes;
  png_read_image(png, raw.row_pointers.data());
  return {};
}
}  // namespace detail

/// Decodes a PNG held in memory to the pixels of Pillow's `Image.open(f).convert("RGB")`, which torchvision's
/// ImageFolder loader returns: no gamma (gAMA, sRGB and iCCP are ignored), alpha and tRNS dropped, grey replicated;
/// grey of 1, 2 or 4 bits scaled to 0..255 (x255, x85, x17); 16-bit colour, grey+alpha and RGBA samples to their
/// high byte; 16-bit grey clipped to 255 (min(v, 255): Pillow's I;16 to RGB conversion, which leaves most 16-bit
/// grey photographs white); a palette index beyond the palette black. `file` names it in messages. Throws ImageError.
inline RgbImage decode_png(std::string_view bytes, const std::string& file, int64_t max_pixels = kMaxImagePixels) {
  detail::PngSource src{bytes, 0, {}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, detail::png_fail, detail::png_warn);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    throw std::bad_alloc();
  }
  detail::PngRaw raw;
  std::string problem = bytes.size() >= 8 && png_sig_cmp(reinterpret_cast<png_const_bytep>(bytes.data()), 0, 8) == 0
                            ? detail::png_decode_into(png, info, src, max_pixels, raw)
                            : "not a readable PNG (no PNG signature)";
  png_destroy_read_struct(&png, &info, nullptr);
  if (!problem.empty())
    throw ImageError(policytrain::detail::error_message("policytrain::data::decode_png", file + ": " + problem));
  RgbImage out{static_cast<int64_t>(raw.height), static_cast<int64_t>(raw.width), {}};
  out.pixels.resize(static_cast<size_t>(out.height * out.width * 3));
  const bool wide = raw.depth == 16;
  const int grey_scale = raw.depth == 1 ? 255 : raw.depth == 2 ? 85 : raw.depth == 4 ? 17 : 1;
  uint8_t* o = out.pixels.data();
  for (size_t y = 0; y < raw.height; ++y) {
    const uint8_t* r = raw.row_pointers[y];
    for (size_t x = 0; x < raw.width; ++x, o += 3) {
      const uint8_t* p = r + x * static_cast<size_t>(raw.channels) * (wide ? 2 : 1);  // high byte first
      if (raw.colour_type == PNG_COLOR_TYPE_PALETTE) {
        const png_color c = p[0] < raw.palette.size() ? raw.palette[p[0]] : png_color{0, 0, 0};
        o[0] = c.red, o[1] = c.green, o[2] = c.blue;
      } else if ((raw.colour_type & PNG_COLOR_MASK_COLOR) != 0) {
        for (size_t c = 0; c < 3; ++c) o[c] = p[c * (wide ? 2 : 1)];
      } else {
        const int v = raw.colour_type == PNG_COLOR_TYPE_GRAY && wide ? std::min(p[0] * 256 + p[1], 255)
                      : wide                                         ? p[0]
                                                                     : p[0] * grey_scale;
        o[0] = o[1] = o[2] = static_cast<uint8_t>(v);
      }
    }
  }
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
  if (static_cast<int64_t>(cinfo.image_width) * static_cast<int64_t>(cinfo.image_height) > max_pixels)
    return "the image is " + std::to_string(cinfo.image_width) + "x" + std::to_string(cinfo.image_height) +
           " pixels; expected at most " + std::to_string(max_pixels);
  // CMYK and YCCK as CMYK (4 bytes a pixel; decode_jpeg converts them as Pillow does), the others as RGB.
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  out.height = cinfo.output_height;
  out.width = cinfo.output_width;
  const size_t bytes_per_pixel = cmyk ? 4 : 3;
  out.pixels.resize(static_cast<size_t>(out.height * out.width) * bytes_per_pixel);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.pixels.data() + static_cast<size_t>(cinfo.output_scanline) * static_cast<size_t>(out.width) * bytes_per_pixel;
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
  if (cinfo.out_color_space == JCS_CMYK) {
    // Pillow reads CMYK inverted ("CMYK;I": Adobe's convention, which its encoder writes too), then converts to RGB
    // as R = (255 - K) - (C * (255 - K)) / 255 in its rounded integer division (Convert.c: cmyk2rgb). In place: pixel
    // p's 3 bytes never overtake the 4 of pixels p and beyond.
    auto div255 = [](int v) { return ((v + 128) / 256 + v + 128) / 256; };
    for (size_t p = 0, n = static_cast<size_t>(out.height * out.width); p < n; ++p) {
      const uint8_t* in = &out.pixels[p * 4];
      const int k = in[3];  // 255 - Pillow's K
      uint8_t rgb[3];
      for (size_t c = 0; c < 3; ++c) rgb[c] = static_cast<uint8_t>(k - div255((255 - in[c]) * k));
      std::memcpy(&out.pixels[p * 3], rgb, 3);
    }
    out.pixels.resize(static_cast<size_t>(out.height * out.width * 3));
  }
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
