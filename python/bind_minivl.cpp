// kamera.minivl: the synthetic clips of the mini vision-language model (src/minivl/clips.h):
// frames (RGB and the objects in them), the questions about any list of frames, and the word
// vocabulary. Pure data, no engine: the model itself is a kamera.Model and a kamera.Vision.
#include "binding.h"
#include "minivl/clips.h"
#include "minivl/files.h"

namespace kamera_py {

namespace {

namespace mv = kamera::minivl;

mv::Split parse_split(const std::string& s) {
  if (s == "test") return mv::Split::Test;
  if (s == "train") return mv::Split::Train;
  throw py::value_error("split must be 'train' or 'test', not '" + s + "'");
}

std::vector<mv::Frame> stream(uint64_t index, int n_frames, const std::string& split) {
  if (n_frames < 1 || n_frames > mv::kMaxStreamFrames)
    throw py::value_error("n_frames must be in [1, " + std::to_string(mv::kMaxStreamFrames) + "]");
  mv::ClipSpec spec;
  spec.n_frames = n_frames;
  return mv::make_stream(parse_split(split), index, spec).frames;
}

py::list objects(const mv::Frame& f) {
  py::list out;
  for (const mv::Object& o : f.objects)
    out.append(py::dict(py::arg("shape") = mv::shape_names()[size_t(o.shape)],
                        py::arg("colour") = mv::colour_names()[size_t(o.colour)],
                        py::arg("row") = o.row, py::arg("col") = o.col));
  return out;
}

}  // namespace

void bind_minivl(py::module_& root) {
  py::module_ m = root.def_submodule("minivl", "Synthetic clips of the mini-VL (docs/MINIVL.md)");
  m.attr("decoder_file") = mv::kDecoderFile;
  m.attr("vision_file") = mv::kVisionFile;
  m.attr("max_frames") = mv::kMaxFrames;

  py::class_<mv::Frame>(m, "Frame", "A 32 x 32 RGB frame and the objects drawn in it.")
      .def_property_readonly(
          "rgb",
          [](py::object self) {
            const auto& f = self.cast<const mv::Frame&>();
            return readonly_array(f.rgb.data(), {mv::kFramePixels, mv::kFramePixels, 3}, self);
          })
      .def_property_readonly("objects", &objects);

  py::class_<mv::Question>(m, "Question", "A question (word ids) and its one-word answer.")
      .def_property_readonly("family",
                             [](const mv::Question& q) {
                               switch (q.family) {
                                 case mv::Family::SingleHop:
                                   return "single-hop";
                                 case mv::Family::CrossFrame:
                                   return "cross-frame";
                                 case mv::Family::TwoFrame:
                                   return "two-frame";
                               }
                               return "?";
                             })
      .def_readonly("kind", &mv::Question::kind)
      .def_readonly("tokens", &mv::Question::tokens)
      .def_readonly("answer", &mv::Question::answer)
      .def_readonly("frames", &mv::Question::frames)
      .def_property_readonly("text", &mv::Question::text);

  m.def("stream", &stream, py::arg("index") = 0, py::arg("n_frames") = 24,
        py::arg("split") = "test", "The frames of stream `index` of a split");
  m.def("questions", &mv::all_questions, py::arg("frames"),
        "Every valid question about these frames (frame words f0.. index the list)");
  m.def("words", &mv::words, "The word vocabulary (token id = index)");
  m.def(
      "word_id", [](const std::string& w) { return mv::word_id(w); }, py::arg("word"));
}

}  // namespace kamera_py
