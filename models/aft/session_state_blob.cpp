#include "session_state_blob.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine/format/error.h"
#include "state_checksum.h"

namespace aft {
namespace {

// Layout, little-endian (as the model file): magic, u32 version, u32 model fingerprint, i64
// position, u32 layers, u32 d_model; per layer u64 key rows, u64 frame_valid, then doubles: m, a,
// b (d each), then floats: frame (d), the last input (d with token shift, else none), the
// feed-forward's last input (d with channel mixing, else none), keys, values,
// scaled keys (rows x blocks x 64 each, channel_blocked_rows.h); last a u64 state_checksum of every
// byte before it.
constexpr char kMagic[8] = {'A', 'F', 'T', 'S', 'T', 'A', 'T', 'E'};
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8 + 4 + 4;
constexpr std::size_t kLayerHeaderBytes = 8 + 8;

// A layer's arrays after its header: the sums (3 d doubles), the frame and the last input (floats)
// and three arrays of rows by channel blocks (floats).
std::size_t layer_array_bytes(const MixerState& layer, std::size_t rows) {
  const std::size_t d = layer.m.size();
  return 3 * d * sizeof(double) +
         (d + layer.last_input.size() + layer.ffn_last_input.size() +
          3 * ChannelBlockedRows::blocks_of(d) * rows * ChannelBlockedRows::kBlock) *
             sizeof(float);
}

// The rows positions [0, position) read: a ring's whole capacity once full. A layer may hold
// more (rows_for grows them ahead); only these are saved.
std::size_t rows_in_use(const MixerState& layer, int64_t position) {
  return std::min<std::size_t>(layer.capacity, static_cast<std::size_t>(position));
}

std::size_t layer_bytes(const MixerState& layer, int64_t position) {
  return kLayerHeaderBytes + layer_array_bytes(layer, rows_in_use(layer, position));
}

// The saved rows of a layer's keys, values and scaled keys in the blob's order (array after
// array, channel block after block): visit(first value, count) for each run of them. Layer:
// MixerState, const for the writer.
template <class Layer, class Visit>
void visit_saved_rows(Layer& layer, std::size_t rows, const Visit& visit) {
  for (auto* rows_of : {&layer.keys, &layer.values, &layer.scaled_keys}) {
    for (std::size_t block = 0; block < rows_of->blocks() && rows > 0; ++block) {
      visit(rows_of->row(0, block), rows * ChannelBlockedRows::kBlock);
    }
  }
}

// Copies n values from bytes at `from` (any alignment); returns where the next ones start.
template <class T>
const unsigned char* copy_values(const unsigned char* from, T* to, std::size_t n) {
  if (n > 0) std::memcpy(to, from, n * sizeof(T));  // to may be null (an empty array)
  return from + n * sizeof(T);
}

class Writer {
 public:
  explicit Writer(unsigned char* out) : out_(out) {}
  void bytes(const void* data, std::size_t n) {
    if (n == 0) return;  // data may be null (an empty array)
    std::memcpy(out_ + at_, data, n);
    at_ += n;
  }
  template <class T>
  void value(T v) {
    bytes(&v, sizeof(v));
  }
  template <class T>
  void values(const T* data, std::size_t n) {
    bytes(data, n * sizeof(T));
  }
  std::size_t at() const { return at_; }

 private:
  unsigned char* out_;
  std::size_t at_ = 0;
};

class Reader {
 public:
  Reader(const unsigned char* data, std::size_t size) : data_(data), size_(size) {}
  void bytes(void* out, std::size_t n) {
    const std::size_t from = at_;
    skip(n);
    std::memcpy(out, data_ + from, n);
  }
  template <class T>
  T value() {
    T v;
    bytes(&v, sizeof(v));
    return v;
  }
  void skip(std::size_t n) {
    if (n > size_ - at_) {
      fail("truncated: " + std::to_string(size_) + " bytes, more expected at offset " +
           std::to_string(at_));
    }
    at_ += n;
  }
  std::size_t at() const { return at_; }

  [[noreturn]] static void fail(const std::string& what) {
    throw Error(AFT_ERR_FORMAT, "session state: " + what);
  }

 private:
  const unsigned char* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

}  // namespace

std::size_t state_blob_size(const SessionState& state) {
  std::size_t size = kHeaderBytes + sizeof(uint64_t);
  for (const MixerState& layer : state.layers) size += layer_bytes(layer, state.position);
  return size;
}

void write_state_blob(const SessionState& state, uint32_t model_fingerprint, void* out) {
  Writer w(static_cast<unsigned char*>(out));
  w.bytes(kMagic, sizeof(kMagic));
  w.value<uint32_t>(kStateBlobVersion);
  w.value<uint32_t>(model_fingerprint);
  w.value<int64_t>(state.position);
  w.value<uint32_t>(static_cast<uint32_t>(state.layers.size()));
  w.value<uint32_t>(static_cast<uint32_t>(state.layers.empty() ? 0 : state.layers[0].m.size()));
  for (const MixerState& layer : state.layers) {
    const std::size_t rows = rows_in_use(layer, state.position);
    w.value<uint64_t>(rows);
    w.value<uint64_t>(layer.frame_valid ? 1 : 0);
    w.values(layer.m.data(), layer.m.size());
    w.values(layer.a.data(), layer.a.size());
    w.values(layer.b.data(), layer.b.size());
    w.values(layer.frame.data(), layer.frame.size());
    w.values(layer.last_input.data(), layer.last_input.size());
    w.values(layer.ffn_last_input.data(), layer.ffn_last_input.size());
    visit_saved_rows(layer, rows, [&](const float* run, std::size_t n) { w.values(run, n); });
  }
  w.value<uint64_t>(state_checksum(out, w.at()));
}

void read_state_blob(const void* data, std::size_t size, uint32_t model_fingerprint,
                     int64_t max_position, SessionState& state) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  Reader r(bytes, size);
  char magic[sizeof(kMagic)];
  r.bytes(magic, sizeof(magic));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) Reader::fail("not a saved session state");
  const auto version = r.value<uint32_t>();
  if (version != kStateBlobVersion) {
    Reader::fail("version " + std::to_string(version) + " (this library reads version " +
                 std::to_string(kStateBlobVersion) + ")");
  }
  const auto fingerprint = r.value<uint32_t>();
  if (fingerprint != model_fingerprint) {
    Reader::fail("saved from another model (fingerprint " + std::to_string(fingerprint) +
                 ", this model's is " + std::to_string(model_fingerprint) + ")");
  }
  const auto position = r.value<int64_t>();
  if (position < 0 || position > max_position) {
    Reader::fail("position " + std::to_string(position) + " outside [0, " +
                 std::to_string(max_position) + "]");
  }
  const auto layers = r.value<uint32_t>();
  const auto width = r.value<uint32_t>();
  const std::size_t d = state.layers.empty() ? 0 : state.layers[0].m.size();
  if (layers != state.layers.size() || width != d) {
    Reader::fail(std::to_string(layers) + " layers x " + std::to_string(width) +
                 " channels (the model has " + std::to_string(state.layers.size()) + " x " +
                 std::to_string(d) + ")");
  }
  // First every field and the checksum, the session untouched; then the copy into its arrays.
  struct LayerPlace {
    std::size_t rows;
    bool frame_valid;
    const unsigned char* floats;
  };
  std::vector<LayerPlace> places;
  for (std::size_t i = 0; i < state.layers.size(); ++i) {
    const MixerState& layer = state.layers[i];
    const auto rows = r.value<uint64_t>();
    const auto frame_valid = r.value<uint64_t>();
    // Exactly the rows the positions read, as the writer saves them: a state saves back the
    // bytes it was restored from.
    const std::size_t needed = rows_in_use(layer, position);
    if (rows != needed || frame_valid > 1) {
      Reader::fail("layer " + std::to_string(i) + ": " + std::to_string(rows) +
                   " key rows at position " + std::to_string(position) + " (expected " +
                   std::to_string(needed) + "), frame flag " + std::to_string(frame_valid));
    }
    places.push_back({static_cast<std::size_t>(rows), frame_valid == 1, bytes + r.at()});
    r.skip(layer_array_bytes(layer, static_cast<std::size_t>(rows)));
  }
  const std::size_t checked = r.at();
  const auto stored = r.value<uint64_t>();
  if (r.at() != size) {
    Reader::fail(std::to_string(size) + " bytes, " + std::to_string(r.at()) + " expected");
  }
  const uint64_t actual = state_checksum(bytes, checked);
  if (stored != actual) {
    Reader::fail("checksum mismatch (stored " + std::to_string(stored) + ", computed " +
                 std::to_string(actual) + "): the bytes were changed");
  }

  // Allocation first, so that no copy is left half done: arrays with fewer rows than saved grow.
  for (std::size_t i = 0; i < state.layers.size(); ++i) {
    MixerState& layer = state.layers[i];
    for (ChannelBlockedRows* rows_of : {&layer.keys, &layer.values, &layer.scaled_keys}) {
      if (rows_of->rows() < places[i].rows) rows_of->resize(places[i].rows, d);
    }
  }
  state.position = position;
  for (std::size_t i = 0; i < state.layers.size(); ++i) {
    MixerState& layer = state.layers[i];
    layer.frame_valid = places[i].frame_valid;
    layer.reframe_pending = false;
    const unsigned char* from = places[i].floats;
    for (AlignedDoubles* sums : {&layer.m, &layer.a, &layer.b}) {
      from = copy_values(from, sums->data(), d);
    }
    from = copy_values(from, layer.frame.data(), d);
    from = copy_values(from, layer.last_input.data(), layer.last_input.size());
    from = copy_values(from, layer.ffn_last_input.data(), layer.ffn_last_input.size());
    visit_saved_rows(layer, places[i].rows,
                     [&](float* run, std::size_t n) { from = copy_values(from, run, n); });
  }
}

}  // namespace aft
