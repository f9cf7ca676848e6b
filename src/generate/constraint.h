// The token-constraint hook of the generation loop (generate/generator.h): constrained decoding
// (a grammar, a JSON schema, a forced tool call: grammar/constraint.h) plugs in here without the
// loop knowing what it constrains to. The interface is grammar::TokenConstraint.
//
// Each step the loop calls, in this order:
//   1. mask(logits)  after logit_bias and the penalties, before sampling: sets to -infinity every
//                    token that may not come next. End-of-generation tokens are tokens like any
//                    other here: a constraint leaves them open only when complete() (the text
//                    so far is a whole document), so the model ends the text only there.
//   2. accept(token) with the token sampled from what mask() left (never a masked one). An error
//                    means the constraint could not follow; the loop then ends the generation
//                    (finish reason "stop") rather than sample from a state it cannot mask.
// The generation ends as any other does: an end-of-generation token (which the mask allowed only
// once the text was complete), a stop string, the token limit. A mask that leaves no token at all
// is a bug of the constraint; the loop then ends the generation with finish reason "stop" rather
// than sample a masked token.
#pragma once

#include "grammar/constraint.h"

namespace kamera {

using TokenConstraint = grammar::TokenConstraint;
using ForcedRun = grammar::ForcedRun;

}  // namespace kamera
