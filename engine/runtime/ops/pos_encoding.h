// The absolute position encodings a model adds to its token embedding (docs/format.md,
// config.pos_encoding): the config's value and the embedding op's mode, one enum for both.
#pragma once

namespace aft {

enum class PosEncoding { None, Sinusoidal, Learned };

}  // namespace aft
