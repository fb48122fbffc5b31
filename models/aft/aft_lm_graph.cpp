#include "aft_lm_graph.h"

#include "engine/runtime/ops/ops.h"
#include "ops/aft_mixer_op.h"
#include "ops/decay_mixer_op.h"

namespace aft {

AftLmGraph build_aft_lm_graph(const ModelConfig& config, const TensorLookup& weight,
                              const MatrixLookup& matrix, kernels::MatmulPrecision precision) {
  AftLmGraph model;
  Graph& g = model.graph;
  const auto d = static_cast<std::size_t>(config.d_model);
  const auto d_ff = static_cast<std::size_t>(config.d_ff);
  const auto vocab = static_cast<std::size_t>(config.vocab_size);
  const auto key_width = static_cast<std::size_t>(config.key_width());
  const kernels::PostOp activation = config.activation == Activation::Gelu ? kernels::PostOp::Gelu
                                     : config.activation == Activation::ReluSquared
                                         ? kernels::PostOp::ReluSquared
                                         : kernels::PostOp::Relu;
  const bool channel_mix = config.ffn == FeedForward::ChannelMix;
  auto bias = [&](const std::string& prefix) {
    return config.linear_bias ? weight(prefix + ".bias") : nullptr;
  };

  auto linear = [&](const std::string& prefix, std::size_t in, std::size_t out, ValueId x,
                    kernels::PostOp post, RowSet rows) {
    return g.add_node(
        make_linear_op(in, out, matrix(prefix + ".weight"), bias(prefix), post, precision), {x},
        prefix, out, rows);
  };
  // x + (in W^T + bias): the skip connection added as the product is written.
  auto linear_plus = [&](const std::string& prefix, std::size_t in, ValueId y, ValueId x,
                         RowSet rows) {
    return g.add_node(make_linear_op(in, d, matrix(prefix + ".weight"), bias(prefix),
                                     kernels::PostOp::None, precision),
                      {y, x}, prefix, d, rows);
  };
  auto layer_norm = [&](const std::string& prefix, ValueId x, RowSet rows) {
    return g.add_node(
        make_layer_norm_op(weight(prefix + ".weight"), weight(prefix + ".bias"), config.norm_eps),
        {x}, prefix, d, rows);
  };

  ValueId x = g.add_node(
      make_embedding_op(
          weight("embed.weight"), d, config.embed_scale, config.pos_encoding,
          config.pos_encoding == PosEncoding::Learned ? weight("pos_embed.weight") : nullptr),
      {}, "embed", d, RowSet::Tokens);
  if (config.embed_norm) x = layer_norm("embed_norm", x, RowSet::Tokens);

  for (int64_t i = 0; i < config.n_layers; ++i) {
    const std::string layer = "layers." + std::to_string(i);
    const std::string mixer = layer + ".mixer";
    // After the last mixer every op works per token: it only needs the rows whose logits are
    // wanted. Channel mixing shifts tokens too: its input is needed for every token.
    const RowSet last_rows = i + 1 == config.n_layers ? RowSet::Output : RowSet::Tokens;
    const RowSet after_mixer = channel_mix ? RowSet::Tokens : last_rows;

    const ValueId h = layer_norm(layer + ".norm1", x, RowSet::Tokens);
    // With token shift, each projection reads its own mix of h and the previous token's h.
    auto projection_input = [&](const char* projection) {
      if (!config.token_shift) return h;
      const std::string name = mixer + ".shift." + projection;
      return g.add_node(
          make_token_shift_op(static_cast<std::size_t>(i), ShiftedInput::Mixer, weight(name)), {h},
          name, d, RowSet::Tokens);
    };
    const ValueId q = linear(mixer + ".query", d, d, projection_input("query"),
                             kernels::PostOp::None, RowSet::Tokens);
    const ValueId k = linear(mixer + ".key", d, key_width, projection_input("key"),
                             kernels::PostOp::None, RowSet::Tokens);
    const ValueId v = linear(mixer + ".value", d, d, projection_input("value"),
                             kernels::PostOp::None, RowSet::Tokens);
    ValueId y;
    if (config.mixer == Mixer::Decay) {
      std::vector<ValueId> mixer_inputs = {q, k, v};
      if (config.token_shift) mixer_inputs.push_back(h);
      y = g.add_node(make_decay_mixer_op(static_cast<std::size_t>(i), d, weight(mixer + ".decay"),
                                         weight(mixer + ".bonus")),
                     mixer_inputs, mixer, d, RowSet::Tokens);
    } else {
      PositionBiasWeights bias_weights;
      if (config.pos_bias_table() || config.mixer == Mixer::Conv) {
        bias_weights.pos_bias = weight(mixer + ".pos_bias");
      } else if (config.mixer == Mixer::Full) {
        bias_weights.pos_u = weight(mixer + ".pos_u");
        bias_weights.pos_v = weight(mixer + ".pos_v");
      }
      model.position_biases.push_back(make_position_bias(config, bias_weights));
      y = g.add_node(
          make_aft_mixer_op(static_cast<std::size_t>(i), key_width, *model.position_biases.back()),
          {q, k, v}, mixer, d, RowSet::Tokens);
    }
    x = linear_plus(mixer + ".output", d, y, x, after_mixer);

    const ValueId h2 = layer_norm(layer + ".norm2", x, after_mixer);
    if (!channel_mix) {
      const ValueId up = linear(layer + ".ffn.up", d, d_ff, h2, activation, after_mixer);
      x = linear_plus(layer + ".ffn.down", d_ff, up, x, after_mixer);
      continue;
    }
    // RWKV-4's channel mixing: x + sigmoid(gate(h2')) * down(act(up(h2''))), each product
    // reading its own mix of h2 and the previous token's; the gate's shift, the last to read
    // the previous token, remembers this call's last.
    const std::string shift = layer + ".ffn.shift.";
    const ValueId up_in =
        g.add_node(make_token_shift_op(static_cast<std::size_t>(i), ShiftedInput::FeedForward,
                                       weight(shift + "up")),
                   {h2}, shift + "up", d, RowSet::Tokens);
    const ValueId gate_in =
        g.add_node(make_token_shift_op(static_cast<std::size_t>(i), ShiftedInput::FeedForward,
                                       weight(shift + "gate"), /*remembers=*/true),
                   {h2}, shift + "gate", d, RowSet::Tokens);
    const ValueId up = linear(layer + ".ffn.up", d, d_ff, up_in, activation, last_rows);
    const ValueId down = linear(layer + ".ffn.down", d_ff, d, up, kernels::PostOp::None, last_rows);
    const ValueId gate =
        linear(layer + ".ffn.gate", d, d, gate_in, kernels::PostOp::None, last_rows);
    x = g.add_node(make_gated_residual_op(), {gate, down, x}, layer + ".ffn", d, last_rows);
  }

  const ValueId h = layer_norm("norm", x, RowSet::Output);
  const kernels::WeightMatrix head =
      config.tied_embeddings ? matrix("embed.weight") : matrix("head.weight");
  const float* head_bias = config.head_bias ? weight("head.bias") : nullptr;
  g.set_output(
      g.add_node(make_linear_op(d, vocab, head, head_bias, kernels::PostOp::None, precision), {h},
                 "head", vocab, RowSet::Output));
  return model;
}

}  // namespace aft
