#include "session_state_blob.h"

#include <cstring>
#include <string>
#include <vector>

#include "crc32.h"
#include "error.h"

namespace aft {
namespace {

// Layout, little-endian (as the model file): magic, u32 version, u32 model fingerprint, i64
// position, u32 layers, u32 d_model; per layer u64 key rows, u64 frame_valid, then floats: m, a,
// b, frame (d each), keys, values, scaled keys (rows x blocks x 64 each, channel_blocked_rows.h);
// last a u32 CRC-32 of every byte before it.
constexpr char kMagic[8] = {'A', 'F', 'T', 'S', 'T', 'A', 'T', 'E'};
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8 + 4 + 4;
constexpr std::size_t kLayerHeaderBytes = 8 + 8;

std::size_t layer_bytes(const MixerState& layer) {
  const std::size_t floats =
      4 * layer.m.size() + layer.keys.floats() + layer.values.floats() + layer.scaled_keys.floats();
  return kLayerHeaderBytes + floats * sizeof(float);
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
  void floats(const float* data, std::size_t n) { bytes(data, n * sizeof(float)); }
  std::size_t at() const { return at_; }

 private:
  unsigned char* out_;
  std::size_t at_ = 0;
};

class Reader {
 public:
  Reader(const unsigned char* data, std::size_t size) : data_(data), size_(size) {}
  void bytes(void* out, std::size_t n) {
    if (n > size_ - at_) {
      fail("truncated: " + std::to_string(size_) + " bytes, more expected at offset " +
           std::to_string(at_));
    }
    if (n == 0) return;  // out may be null (an empty array)
    std::memcpy(out, data_ + at_, n);
    at_ += n;
  }
  template <class T>
  T value() {
    T v;
    bytes(&v, sizeof(v));
    return v;
  }
  void floats(float* out, std::size_t n) { bytes(out, n * sizeof(float)); }
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
  std::size_t size = kHeaderBytes + sizeof(uint32_t);
  for (const MixerState& layer : state.layers) size += layer_bytes(layer);
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
    w.value<uint64_t>(layer.keys.rows());
    w.value<uint64_t>(layer.frame_valid ? 1 : 0);
    w.floats(layer.m.data(), layer.m.size());
    w.floats(layer.a.data(), layer.a.size());
    w.floats(layer.b.data(), layer.b.size());
    w.floats(layer.frame.data(), layer.frame.size());
    w.floats(layer.keys.data(), layer.keys.floats());
    w.floats(layer.values.data(), layer.values.floats());
    w.floats(layer.scaled_keys.data(), layer.scaled_keys.floats());
  }
  w.value<uint32_t>(crc32(out, w.at()));
}

SessionState read_state_blob(const void* data, std::size_t size, uint32_t model_fingerprint,
                             const SessionState& initial, int64_t max_position) {
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
  SessionState state = initial;
  state.position = r.value<int64_t>();
  if (state.position < 0 || state.position > max_position) {
    Reader::fail("position " + std::to_string(state.position) + " outside [0, " +
                 std::to_string(max_position) + "]");
  }
  const auto layers = r.value<uint32_t>();
  const auto width = r.value<uint32_t>();
  const std::size_t d = initial.layers.empty() ? 0 : initial.layers[0].m.size();
  if (layers != initial.layers.size() || width != d) {
    Reader::fail(std::to_string(layers) + " layers x " + std::to_string(width) +
                 " channels (the model has " + std::to_string(initial.layers.size()) + " x " +
                 std::to_string(d) + ")");
  }
  for (std::size_t i = 0; i < state.layers.size(); ++i) {
    MixerState& layer = state.layers[i];
    const auto rows = r.value<uint64_t>();
    const auto frame_valid = r.value<uint64_t>();
    // The engine keeps the rows every position so far needs, at most the ring's capacity.
    const std::size_t needed =
        std::min<std::size_t>(layer.capacity, static_cast<std::size_t>(state.position));
    if (rows > layer.capacity || rows < needed || frame_valid > 1) {
      Reader::fail("layer " + std::to_string(i) + ": " + std::to_string(rows) +
                   " key rows at position " + std::to_string(state.position) + " (expected " +
                   std::to_string(needed) + " to " + std::to_string(layer.capacity) +
                   "), frame flag " + std::to_string(frame_valid));
    }
    layer.frame_valid = frame_valid == 1;
    r.floats(layer.m.data(), d);
    r.floats(layer.a.data(), d);
    r.floats(layer.b.data(), d);
    r.floats(layer.frame.data(), d);
    for (ChannelBlockedRows* rows_of : {&layer.keys, &layer.values, &layer.scaled_keys}) {
      rows_of->resize(static_cast<std::size_t>(rows), d);
      r.floats(rows_of->data(), rows_of->floats());
    }
  }
  const std::size_t checked = r.at();
  const auto stored = r.value<uint32_t>();
  if (r.at() != size) {
    Reader::fail(std::to_string(size) + " bytes, " + std::to_string(r.at()) + " expected");
  }
  const uint32_t actual = crc32(bytes, checked);
  if (stored != actual) {
    Reader::fail("checksum mismatch (stored " + std::to_string(stored) + ", computed " +
                 std::to_string(actual) + "): the bytes were changed");
  }
  return state;
}

}  // namespace aft
