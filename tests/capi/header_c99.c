/* kamera.h compiles as strict C99 (-std=c99 -Wpedantic -Werror) on its own. */
#include "kamera.h"

int kamera_header_c99_check(void);
int kamera_header_c99_check(void) {
  kamera_serve_options o;
  kamera_pos p = {0, 1, 2};
  o.policy = KAMERA_POLICY_PATCH;
  return (int)o.policy + p.w + KAMERA_FULL_RANK;
}
