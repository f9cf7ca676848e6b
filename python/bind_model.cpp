// kamera.Model, kamera.Chunk, kamera.Vision and kamera.Sampler over the C API.
#include "binding.h"

namespace kamera_py {

namespace {

std::shared_ptr<Model> load_model(const std::string& path, const std::string& tokenizer) {
  kamera_model* raw = nullptr;
  {
    py::gil_scoped_release nogil;
    check(kamera_model_load(path.c_str(), tokenizer.empty() ? nullptr : tokenizer.c_str(), &raw));
  }
  auto m = std::make_shared<Model>();
  m->h = ModelPtr(raw, kamera_model_free);
  check(kamera_model_get_info(raw, &m->info));
  return m;
}

py::list kv_channels(const Model& m) {
  py::list out;
  for (int32_t c = 0; c < m.info.n_kv_channels; ++c) {
    kamera_kv_channel ch;
    check(kamera_model_kv_channel(m.h.get(), c, &ch));
    out.append(py::make_tuple(ch.name, ch.width, bool(ch.rotated)));
  }
  return out;
}

std::vector<int32_t> tokenize(const Model& m, const std::string& text, bool add_bos, bool raw) {
  const uint32_t flags =
      (add_bos ? KAMERA_TOKENIZE_ADD_BOS : 0u) | (raw ? KAMERA_TOKENIZE_RAW : 0u);
  int32_t n = 0;
  check(kamera_tokenize(m.h.get(), text.data(), text.size(), flags, nullptr, 0, &n));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  check(kamera_tokenize(m.h.get(), text.data(), text.size(), flags, ids.data(), n, &n));
  return ids;
}

// messages: a list of {"role": ..., "content": ...} dicts.
std::vector<int32_t> chat_tokenize(const Model& m, py::list messages, py::object chat_template,
                                   bool add_generation_prompt) {
  std::vector<std::string> text;  // owns the strings the C structs point into
  for (py::handle msg : messages) {
    py::dict d = py::cast<py::dict>(msg);
    text.push_back(py::str(d["role"]));
    text.push_back(py::str(d["content"]));
  }
  std::vector<kamera_chat_message> msgs;
  for (size_t i = 0; i < text.size(); i += 2)
    msgs.push_back({text[i].c_str(), text[i + 1].c_str()});
  const std::string tmpl =
      chat_template.is_none() ? "" : py::str(chat_template).cast<std::string>();
  const char* t = chat_template.is_none() ? nullptr : tmpl.c_str();
  int32_t n = 0;
  check(kamera_chat_tokenize(m.h.get(), t, msgs.data(), int32_t(msgs.size()), add_generation_prompt,
                             nullptr, 0, &n));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  check(kamera_chat_tokenize(m.h.get(), t, msgs.data(), int32_t(msgs.size()), add_generation_prompt,
                             ids.data(), n, &n));
  return ids;
}

py::str detokenize(const Model& m, const std::vector<int32_t>& ids) {
  size_t len = 0;
  check(kamera_detokenize(m.h.get(), ids.data(), int32_t(ids.size()), nullptr, 0, &len));
  std::string s(len + 1, '\0');
  check(kamera_detokenize(m.h.get(), ids.data(), int32_t(ids.size()), s.data(), s.size(), &len));
  s.resize(len);
  // Byte pieces may split a UTF-8 character: undecodable bytes become U+FFFD.
  return py::reinterpret_steal<py::str>(
      PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace"));
}

std::shared_ptr<Chunk> wrap_chunk(const std::shared_ptr<Model>& model, kamera_chunk* raw) {
  auto c = std::make_shared<Chunk>();
  c->h = ChunkPtr(raw, kamera_chunk_free);
  c->model = model;
  return c;
}

std::shared_ptr<Chunk> chunk_from_tokens(const std::shared_ptr<Model>& model,
                                         const std::vector<int32_t>& ids) {
  kamera_chunk* raw = nullptr;
  check(kamera_chunk_from_tokens(model->h.get(), ids.data(), int32_t(ids.size()), &raw));
  return wrap_chunk(model, raw);
}

// rows: (n, dim) float32; layout: (n, 3) int32 relative (t, h, w) or None.
std::shared_ptr<Chunk> chunk_from_embeddings(
    const std::shared_ptr<Model>& model,
    py::array_t<float, py::array::c_style | py::array::forcecast> rows, py::object layout) {
  if (rows.ndim() != 2) throw py::value_error("embedding rows must be a 2-D array (n, dim)");
  std::vector<kamera_pos> pos;
  if (!layout.is_none()) {
    auto l = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(layout);
    if (!l || l.ndim() != 2 || l.shape(1) != 3 || l.shape(0) != rows.shape(0))
      throw py::value_error("layout must be an (n, 3) integer array of (t, h, w), n = rows");
    for (py::ssize_t i = 0; i < l.shape(0); ++i)
      pos.push_back({l.at(i, 0), l.at(i, 1), l.at(i, 2)});
  }
  kamera_chunk* raw = nullptr;
  check(kamera_chunk_from_embeddings(model->h.get(), rows.data(), int32_t(rows.shape(0)),
                                     int32_t(rows.shape(1)), pos.empty() ? nullptr : pos.data(),
                                     &raw));
  return wrap_chunk(model, raw);
}

std::string chunk_id(const Chunk& c) {
  char hex[KAMERA_ID_HEX_SIZE];
  check(kamera_chunk_id(c.h.get(), hex));
  return hex;
}

// A read-only, zero-copy view of the chunk's canonical KV; the array keeps the chunk alive.
py::array chunk_kv(py::object self, int layer, int channel) {
  const Chunk& c = self.cast<const Chunk&>();
  const float* data = nullptr;
  int32_t rows = 0, cols = 0;
  check(kamera_chunk_kv(c.h.get(), layer, channel, &data, &rows, &cols));
  return readonly_array(data, {rows, cols}, self);
}

struct Vision {
  std::unique_ptr<kamera_vision, Deleter<kamera_vision, kamera_vision_free>> h;
  kamera_vision_info info{};
};

std::shared_ptr<Chunk> vision_encode(Vision& v, const std::shared_ptr<Model>& model,
                                     py::array_t<uint8_t, py::array::c_style> rgb) {
  kamera_chunk* raw = nullptr;
  {
    py::gil_scoped_release nogil;
    check(kamera_vision_encode(v.h.get(), model->h.get(), rgb.data(), size_t(rgb.size()), &raw));
  }
  return wrap_chunk(model, raw);
}

using FromPath = kamera_status (*)(kamera_context*, kamera_vision*, const char*, kamera_chunk**);
using FromBytes = kamera_status (*)(kamera_context*, kamera_vision*, const uint8_t*, size_t,
                                    kamera_chunk**);

// A media chunk from a path (str, os.PathLike) or a file's encoded bytes (bytes, bytearray,
// memoryview), through the C API's path or bytes entry point.
std::shared_ptr<Chunk> chunk_from_media(const std::shared_ptr<Context>& ctx, Vision& v,
                                        py::object media, FromPath from_path,
                                        FromBytes from_bytes) {
  kamera_chunk* raw = nullptr;
  if (py::isinstance<py::bytes>(media) || py::isinstance<py::bytearray>(media) ||
      py::isinstance<py::memoryview>(media)) {
    const std::string bytes = py::bytes(py::module_::import("builtins").attr("bytes")(media));
    py::gil_scoped_release nogil;
    check(from_bytes(ctx->h.get(), v.h.get(), reinterpret_cast<const uint8_t*>(bytes.data()),
                     bytes.size(), &raw));
  } else {
    const std::string path = py::str(py::module_::import("os").attr("fspath")(media));
    py::gil_scoped_release nogil;
    check(from_path(ctx->h.get(), v.h.get(), path.c_str(), &raw));
  }
  return wrap_chunk(ctx->model, raw);
}

// Chunk.from_image: a path or the encoded bytes of a PNG or JPEG.
std::shared_ptr<Chunk> chunk_from_image(const std::shared_ptr<Context>& ctx, Vision& v,
                                        py::object image) {
  return chunk_from_media(ctx, v, std::move(image), kamera_chunk_from_image,
                          kamera_chunk_from_image_bytes);
}

// Chunk.from_audio: a path or the encoded bytes of a WAV, FLAC or MP3 file.
std::shared_ptr<Chunk> chunk_from_audio(const std::shared_ptr<Context>& ctx, Vision& v,
                                        py::object audio) {
  return chunk_from_media(ctx, v, std::move(audio), kamera_chunk_from_audio,
                          kamera_chunk_from_audio_bytes);
}

std::shared_ptr<Chunk> chunk_from_frames(const std::shared_ptr<Context>& ctx, Vision& v,
                                         const std::vector<std::string>& paths, double fps) {
  std::vector<const char*> p;
  for (const auto& s : paths) p.push_back(s.c_str());
  kamera_chunk* raw = nullptr;
  {
    py::gil_scoped_release nogil;
    check(kamera_chunk_from_frames_at(ctx->h.get(), v.h.get(), p.data(), int32_t(p.size()), fps,
                                      &raw));
  }
  return wrap_chunk(ctx->model, raw);
}

py::dict vision_stats(const Vision& v) {
  kamera_vision_stats s{};
  check(kamera_vision_get_stats(v.h.get(), &s));
  py::dict d;
  d["encodes"] = s.encodes;
  d["hits"] = s.hits;
  d["store_hits"] = s.store_hits;
  d["encode_ms"] = s.encode_ms;
  return d;
}

struct Sampler {
  std::unique_ptr<kamera_sampler, Deleter<kamera_sampler, kamera_sampler_free>> h;
};

}  // namespace

std::shared_ptr<Chunk> as_chunk(const std::shared_ptr<Model>& model, py::handle obj) {
  if (py::isinstance<Chunk>(obj)) return obj.cast<std::shared_ptr<Chunk>>();
  return chunk_from_tokens(model, obj.cast<std::vector<int32_t>>());
}

namespace {

using ModelClass = py::class_<Model, std::shared_ptr<Model>>;
using ChunkClass = py::class_<Chunk, std::shared_ptr<Chunk>>;
using VisionClass = py::class_<Vision>;

void bind_model_class(ModelClass& cls) {
  cls.def(py::init(&load_model), py::arg("path"), py::arg("tokenizer") = "")
      .def_property_readonly("arch", [](const Model& x) { return std::string(x.info.arch); })
      .def_property_readonly("format", [](const Model& x) { return std::string(x.info.format); })
      .def_property_readonly("n_vocab", [](const Model& x) { return x.info.n_vocab; })
      .def_property_readonly("dim", [](const Model& x) { return x.info.dim; })
      .def_property_readonly(
          "input_dim", [](const Model& x) { return x.info.input_dim; },
          "width of an embedding row (dim x (1 + deepstack layers) for qwen3vl)")
      .def_property_readonly("n_layers", [](const Model& x) { return x.info.n_layers; })
      .def_property_readonly("n_heads", [](const Model& x) { return x.info.n_heads; })
      .def_property_readonly("n_kv_heads", [](const Model& x) { return x.info.n_kv_heads; })
      .def_property_readonly("head_dim", [](const Model& x) { return x.info.head_dim; })
      .def_property_readonly("ctx_len", [](const Model& x) { return x.info.ctx_len; })
      .def_property_readonly("bos", [](const Model& x) { return x.info.bos; })
      .def_property_readonly("eos", [](const Model& x) { return x.info.eos; })
      .def_property_readonly("kv_channels", &kv_channels,
                             "[(name, width, rotated)] of every layer's KV channels")
      .def("tokenize", &tokenize, py::arg("text"), py::arg("add_bos") = false,
           py::arg("raw") = false, "Token ids; raw: no dummy space prefix")
      .def("chat_tokenize", &chat_tokenize, py::arg("messages"),
           py::arg("chat_template") = py::none(), py::arg("add_generation_prompt") = true,
           "Messages ({'role', 'content'} dicts) rendered with a chat template (a built-in name, "
           "a Jinja source, or None: the model's own) and tokenized")
      .def("detokenize", &detokenize, py::arg("ids"));
}

void bind_chunk_class(ChunkClass& cls) {
  cls.def(py::init(&chunk_from_tokens), py::arg("model"), py::arg("tokens"))
      .def_static("from_embeddings", &chunk_from_embeddings, py::arg("model"), py::arg("rows"),
                  py::arg("layout") = py::none())
      .def_static("from_image", &chunk_from_image, py::arg("ctx"), py::arg("vision"),
                  py::arg("image"),
                  "An image chunk (a Qwen2-VL, Kimi-VL, SmolVLM, Gemma 3, InternVL or LLaVA "
                  "mmproj): image is a PNG/JPEG path or its bytes")
      .def_static("from_audio", &chunk_from_audio, py::arg("ctx"), py::arg("vision"),
                  py::arg("audio"),
                  "An audio clip chunk (an audio tower's mmproj: Qwen2.5-Omni's or Qwen3-ASR's): "
                  "audio is a "
                  "WAV/FLAC/MP3 path or its bytes, resampled to 16 kHz; rows on positions (i, i, "
                  "i), to be written between <|audio_bos|> and <|audio_eos|>")
      .def_static("from_frames", &chunk_from_frames, py::arg("ctx"), py::arg("vision"),
                  py::arg("paths"), py::arg("fps") = 0.0,
                  "Video frames (image paths), paired in time; fps: their rate (Qwen2.5-VL "
                  "scales t by seconds; 0: 2 fps)")
      .def_property_readonly("id", &chunk_id)
      .def_property_readonly("n_tokens",
                             [](const Chunk& c) { return kamera_chunk_n_tokens(c.h.get()); })
      .def_property_readonly("extent",
                             [](const Chunk& c) { return kamera_chunk_extent(c.h.get()); })
      .def_property_readonly("model", [](const Chunk& c) { return c.model; })
      .def("kv", &chunk_kv, py::arg("layer"), py::arg("channel"),
           "Read-only view (tokens, width) of the cached canonical KV (Context.cache first)")
      .def("__len__", [](const Chunk& c) { return kamera_chunk_n_tokens(c.h.get()); });
}

void bind_vision_and_sampler(py::module_& m, VisionClass& vision) {
  vision
      .def(py::init([](const std::string& path) {
             auto v = std::make_unique<Vision>();
             kamera_vision* raw = nullptr;
             check(kamera_vision_load(path.c_str(), &raw));
             v->h.reset(raw);
             check(kamera_vision_get_info(raw, &v->info));
             return v;
           }),
           py::arg("path"))
      .def_property_readonly("image_size", [](const Vision& v) { return v.info.image_size; })
      .def_property_readonly("token_grid", [](const Vision& v) { return v.info.token_grid; })
      .def_property_readonly("n_tokens", [](const Vision& v) { return v.info.n_tokens; })
      .def_property_readonly("out_dim", [](const Vision& v) { return v.info.out_dim; })
      .def_property_readonly(
          "stats", &vision_stats,
          "{encodes, hits, store_hits, encode_ms} of a tower that takes pictures of any size")
      .def("encode", &vision_encode, py::arg("model"), py::arg("rgb"),
           "An embedding chunk (layout (0, row, col)) of one RGB frame (size, size, 3) uint8");

  py::class_<Sampler>(m, "Sampler", "Greedy (temperature 0) or temperature/top-k/top-p sampling.")
      .def(py::init([](float temperature, int top_k, float top_p, uint64_t seed) {
             kamera_sampler_params p{temperature, top_k, top_p, seed};
             auto s = std::make_unique<Sampler>();
             kamera_sampler* raw = nullptr;
             check(kamera_sampler_new(&p, &raw));
             s->h.reset(raw);
             return s;
           }),
           py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f,
           py::arg("seed") = 0)
      .def(
          "sample",
          [](Sampler& s, py::array_t<float, py::array::c_style | py::array::forcecast> logits) {
            if (logits.ndim() != 1) throw py::value_error("sample() takes one row of logits");
            int32_t t = 0;
            check(kamera_sampler_sample(s.h.get(), logits.data(), int32_t(logits.size()), &t));
            return t;
          },
          py::arg("logits"), "A token id drawn from one row of logits");
}

}  // namespace

void bind_model(py::module_& m) {
  // The classes first, then their methods: a signature names each class by its Python name.
  ModelClass model(m, "Model", "A loaded model (GGUF or llama2.c).");
  ChunkClass chunk(m, "Chunk", "Token ids or embedding rows, with a content id.");
  VisionClass vision(m, "Vision", "A vision encoder (mmproj GGUF): frames to embedding chunks.");
  bind_model_class(model);
  bind_chunk_class(chunk);
  bind_vision_and_sampler(m, vision);
}

}  // namespace kamera_py
