/* The public header compiles as C (C99) and its functions link from C. */
#include <stdio.h>
#include <string.h>

#include "aft.h"

int main(void) {
  aft_model* model = NULL;
  aft_status status = aft_model_load("no-such-file.aft", NULL, &model);
  if (status != AFT_ERR_IO || model != NULL ||
      strstr(aft_last_error(), "no-such-file.aft") == NULL) {
    fprintf(stderr, "unexpected status %d: %s\n", (int)status, aft_last_error());
    return 1;
  }
  if (aft_model_fingerprint(model) != 0) return 1; /* NULL names no model */
  aft_sampler_params params = aft_sampler_default_params();
  params.temperature = 0.0f;
  aft_sampler* sampler = NULL;
  if (aft_sampler_create(&params, &sampler) != AFT_OK) return 1;
  const float logits[3] = {0.5f, 2.0f, 1.0f};
  int32_t token = -1;
  status = aft_sampler_sample(sampler, logits, 3, &token);
  aft_sampler_free(sampler);
  return status == AFT_OK && token == 1 ? 0 : 1;
}
