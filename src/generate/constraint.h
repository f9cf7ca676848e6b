// The token-constraint hook of the generation loop (generate/generator.h): constrained decoding
// (a grammar, a JSON schema, a forced tool call) plugs in here without the loop knowing what it
// constrains to.
//
// Each step the loop calls, in this order:
//   1. mask(logits)  after logit_bias and the penalties, before sampling: set to -infinity every
//                    token that may not come next. End-of-generation tokens are tokens like any
//                    other here: a constraint that is not complete masks them (else the model may
//                    end the text early); one that is complete may leave them open.
//   2. accept(token) with the token sampled from what mask() left (never a masked one).
//   3. complete()    after accept(): true when the constrained text is finished and nothing may
//                    follow; the loop then ends the generation (finish reason "stop") without
//                    sampling again.
// The loop never calls mask() again after complete() is true. A mask that leaves no token at all
// is a bug of the constraint; the loop then ends the generation with finish reason "stop"
// rather than sample a masked token.
#pragma once

#include <cstdint>
#include <span>

namespace kamera {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual void mask(std::span<float> logits) = 0;
  virtual void accept(int32_t token) = 0;
  virtual bool complete() const = 0;
};

}  // namespace kamera
