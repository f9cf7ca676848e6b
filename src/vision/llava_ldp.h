// MobileVLM's projectors after their MLP (vision/llava_vision.h has the file's layout), on the
// side x side rows y (raster order, out_dim wide) of one picture:
//   ldpv2 (MobileVLM V2's LDPNetV2Projector): the mean of each 2 x 2 block (TokenDownLayer), then
//         z = p + b + depthwise 3 x 3 convolution of p (zero padding 1; PosInjectLayer)
//   ldp   (MobileVLM's LDPBlock: two torchvision InvertedResidual blocks of expand ratio 1, the
//         second of stride 2): per block, a depthwise 3 x 3 convolution (no bias, zero padding 1,
//         stride 1 then 2), LayerNorm over the channels, hardswish, squeeze-excitation (the mean
//         over the grid, fc1, ReLU, fc2, hardsigmoid, times the channels), a pointwise (1 x 1)
//         convolution without bias, LayerNorm; the first block adds its input
// Both give (side / 2)^2 rows in raster order (llama.cpp d32676d's models/llava.cpp computes the
// same for a side of 24 only).
#pragma once

#include <vector>

#include "vision/llava_vision.h"

namespace kamera {

class ThreadPool;

std::vector<float> ldpv2_project(const LlavaVisionModel& m, const std::vector<float>& y);
std::vector<float> ldp_project(const LlavaVisionModel& m, const std::vector<float>& y,
                               ThreadPool* pool);

}  // namespace kamera
