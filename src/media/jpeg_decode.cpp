// JPEG bytes -> RGB8 through libjpeg(-turbo), errors by setjmp/longjmp kept inside this file.
//
// libjpeg's defaults are kept (islow DCT, fancy upsampling): they are what PIL uses, so the
// decoded pixels are the ones Hugging Face's processor sees. Premature end of data, which libjpeg
// only warns about (and pads with grey), is an error here.
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first
#include <jerror.h>
#include <jpeglib.h>
#include <csetjmp>

#include "media/image.h"

namespace kamera::media_detail {

namespace {

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 64];
};

void on_error_exit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1) are ignored except premature end of data: a truncated file is an error.
void on_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    auto* e = reinterpret_cast<JpegError*>(cinfo->err);
    std::snprintf(e->message, sizeof(e->message), "file is truncated (premature end of data)");
    std::longjmp(e->jump, 1);
  }
}

// A progressive file may hold thousands of tiny scans, each a full pass over the coefficients.
void on_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  const int scan = reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number;
  if (scan > kMaxJpegScans) {
    auto* e = reinterpret_cast<JpegError*>(cinfo->err);
    std::snprintf(e->message, sizeof(e->message), "progressive JPEG with more than %d scans",
                  kMaxJpegScans);
    std::longjmp(e->jump, 1);
  }
}

}  // namespace

Result<Image> decode_jpeg(std::span<const uint8_t> bytes, std::string_view name,
                          const DecodeLimits& limits) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  jpeg_progress_mgr progress{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_error_exit;
  err.mgr.emit_message = on_message;
  err.message[0] = 0;
  Image img;
  Status refused;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return make_error(ErrorCode::CorruptData, "{}: bad JPEG: {}", name, err.message);
  }
  jpeg_create_decompress(&cinfo);
  progress.progress_monitor = on_progress;
  cinfo.progress = &progress;
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  refused = check_image_dims(cinfo.image_width, cinfo.image_height, name, limits);
  if (refused.ok() && (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK))
    refused = make_error(ErrorCode::Unsupported,
                         "{}: CMYK JPEG images are not supported; convert the image to RGB", name);
  if (refused.ok()) {
    cinfo.out_color_space = JCS_RGB;
    // Working memory: progressive coefficients (2 bytes a sample) plus slack.
    cinfo.mem->max_memory_to_use = long(limits.max_pixels * 8 + (32l << 20));
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != 3) {
      std::snprintf(err.message, sizeof(err.message), "decoder gave %d channels, not 3",
                    cinfo.output_components);
      std::longjmp(err.jump, 1);
    }
    img.width = int(cinfo.output_width);
    img.height = int(cinfo.output_height);
    img.rgb.resize(size_t(img.width) * size_t(img.height) * 3);
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = img.rgb.data() + size_t(cinfo.output_scanline) * size_t(img.width) * 3;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
  }
  jpeg_destroy_decompress(&cinfo);
  if (!refused.ok()) return refused.error();
  return img;
}

// The SOF's size: jpeg_read_header stops at the first scan, before any entropy-coded data.
Result<ImageSize> jpeg_size(std::span<const uint8_t> bytes, std::string_view name) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_error_exit;
  err.mgr.emit_message = on_message;
  err.message[0] = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return make_error(ErrorCode::CorruptData, "{}: bad JPEG header: {}", name, err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  const ImageSize size{int64_t(cinfo.image_width), int64_t(cinfo.image_height)};
  jpeg_destroy_decompress(&cinfo);
  return size;
}

}  // namespace kamera::media_detail
