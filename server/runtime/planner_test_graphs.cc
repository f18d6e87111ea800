// Builders for the planner and executor test graphs (see planner_test_graphs.h).
#include "server/runtime/planner_test_graphs.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace convoy::runtime::testing {
namespace {

// Adds a random constant named `name` and returns the name.
std::string Constant(Graph& g, const std::string& name, Shape shape, uint32_t seed, float lo = -0.5f,
                     float hi = 0.5f) {
  (void)g.AddConstant(name, RandomTensor(std::move(shape), seed, lo, hi));
  return name;
}

Conv2dAttrs Conv(int64_t kernel, int64_t pad, bool bias, Activation activation) {
  Conv2dAttrs a;
  a.window = Window2d{kernel, kernel, 1, 1, pad, pad, pad, pad, 1, 1};
  a.has_bias = bias;
  a.activation = activation;
  return a;
}

}  // namespace

int CountSteps(const ExecutionPlan& plan, convoy::OpKind op) {
  int count = 0;
  for (const auto& step : plan.steps()) count += step->op() == op;
  return count;
}

Tensor RandomTensor(Shape shape, uint32_t seed, float lo, float hi) {
  Tensor t = Tensor::Zeros(std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.data) v = dist(rng);
  return t;
}

absl::StatusOr<Graph> EveryOpGraph(uint32_t seed) {
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, 3, 8, 8}));
  auto add = [&g](const std::string& name, NodeAttrs attrs, std::vector<std::string> in,
                  std::vector<std::string> out) { return g.AddNode(MakeNode(name, std::move(attrs), in, out)); };
  CONVOY_RETURN_IF_ERROR(add("conv1", Conv(3, 1, true, Activation::Relu()),
                             {"x", Constant(g, "w1", {8, 3, 3, 3}, seed + 1), Constant(g, "b1", {8}, seed + 2)},
                             {"c1"}));
  CONVOY_RETURN_IF_ERROR(add("bn", BatchNormAttrs{1e-3f},
                             {"c1", Constant(g, "gamma", {8}, seed + 3, 0.5f, 1.5f),
                              Constant(g, "beta", {8}, seed + 4), Constant(g, "mean", {8}, seed + 5),
                              Constant(g, "var", {8}, seed + 6, 0.5f, 2.0f)},
                             {"bn_out"}));
  Pool2dAttrs max_pool;
  max_pool.window = Window2d{2, 2, 2, 2, 0, 0, 0, 0, 1, 1};
  CONVOY_RETURN_IF_ERROR(add("pool1", max_pool, {"bn_out"}, {"p1"}));
  Conv2dAttrs residual = Conv(1, 0, true, Activation::Relu());
  residual.residual = ResidualPosition::kBeforeActivation;
  CONVOY_RETURN_IF_ERROR(add("conv2", residual,
                             {"p1", Constant(g, "w2", {8, 8, 1, 1}, seed + 7), Constant(g, "b2", {8}, seed + 8), "p1"},
                             {"c2"}));
  CONVOY_RETURN_IF_ERROR(add("shuffle", ChannelShuffleAttrs{2}, {"c2"}, {"shuffled"}));
  CONVOY_RETURN_IF_ERROR(add("split", SplitAttrs{1, {3, 5}}, {"shuffled"}, {"s0", "s1"}));
  PadAttrs pad{PadMode::kEdge, {0, 0, 1, 1, 0, 0, 1, 1}, 0.0f};
  CONVOY_RETURN_IF_ERROR(add("pad", pad, {"s0"}, {"padded"}));
  Pool2dAttrs avg_pool;
  avg_pool.kind = PoolKind::kAverage;
  avg_pool.window = Window2d{3, 3, 1, 1, 0, 0, 0, 0, 1, 1};
  CONVOY_RETURN_IF_ERROR(add("avg", avg_pool, {"padded"}, {"smoothed"}));
  CONVOY_RETURN_IF_ERROR(add("concat", ConcatAttrs{1}, {"smoothed", "s1"}, {"joined"}));
  Pool2dAttrs global;
  global.kind = PoolKind::kAverage;
  global.global = true;
  CONVOY_RETURN_IF_ERROR(add("se_pool", global, {"joined"}, {"se_mean"}));
  CONVOY_RETURN_IF_ERROR(add("se_gate", ActivationAttrs{{ActivationKind::kSigmoid, 0, 0}}, {"se_mean"}, {"gate"}));
  CONVOY_RETURN_IF_ERROR(add("se_mul", BinaryAttrs{BinaryKind::kMul}, {"gate", "joined"}, {"gated"}));
  CONVOY_RETURN_IF_ERROR(
      add("shift", BinaryAttrs{BinaryKind::kAdd}, {"gated", Constant(g, "shift_c", {1, 8, 1, 1}, seed + 9)},
          {"features"}));
  CONVOY_RETURN_IF_ERROR(add("head_pool", global, {"features"}, {"pooled"}));
  CONVOY_RETURN_IF_ERROR(add("flatten", FlattenAttrs{1}, {"pooled"}, {"flat"}));
  GemmAttrs fc{0.5f, 2.0f, false, true, true};
  CONVOY_RETURN_IF_ERROR(
      add("fc", fc, {"flat", Constant(g, "fc_w", {10, 8}, seed + 10), Constant(g, "fc_b", {10}, seed + 11)},
          {"logits"}));
  CONVOY_RETURN_IF_ERROR(add("softmax", SoftmaxAttrs{-1}, {"logits"}, {"probs"}));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("probs"));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("features"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

absl::StatusOr<Graph> SqueezeExcitationGraph(uint32_t seed) {
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, 3, 12, 12}));
  auto add = [&g](const std::string& name, NodeAttrs attrs, std::vector<std::string> in,
                  std::vector<std::string> out) { return g.AddNode(MakeNode(name, std::move(attrs), in, out)); };
  const Activation silu{ActivationKind::kSilu, 0, 0};
  Conv2dAttrs stem = Conv(3, 1, true, Activation::Relu());
  stem.window.stride_h = stem.window.stride_w = 2;
  CONVOY_RETURN_IF_ERROR(add("stem", stem, {"x", Constant(g, "w0", {16, 3, 3, 3}, seed), Constant(g, "b0", {16}, seed + 1)},
                             {"c0"}));
  Conv2dAttrs depthwise = Conv(3, 1, true, silu);
  depthwise.groups = 16;
  CONVOY_RETURN_IF_ERROR(add("dw", depthwise,
                             {"c0", Constant(g, "w1", {16, 1, 3, 3}, seed + 2), Constant(g, "b1", {16}, seed + 3)},
                             {"d"}));
  Pool2dAttrs global;
  global.kind = PoolKind::kAverage;
  global.global = true;
  CONVOY_RETURN_IF_ERROR(add("se_pool", global, {"d"}, {"m"}));
  CONVOY_RETURN_IF_ERROR(add("se_reduce", Conv(1, 0, true, silu),
                             {"m", Constant(g, "w2", {4, 16, 1, 1}, seed + 4), Constant(g, "b2", {4}, seed + 5)},
                             {"r"}));
  CONVOY_RETURN_IF_ERROR(add("se_expand", Conv(1, 0, true, Activation{ActivationKind::kSigmoid, 0, 0}),
                             {"r", Constant(g, "w3", {16, 4, 1, 1}, seed + 6), Constant(g, "b3", {16}, seed + 7)},
                             {"gate"}));
  CONVOY_RETURN_IF_ERROR(add("se_mul", BinaryAttrs{BinaryKind::kMul}, {"d", "gate"}, {"gated"}));
  CONVOY_RETURN_IF_ERROR(add("project", Conv(1, 0, true, Activation{ActivationKind::kIdentity, 0, 0}),
                             {"gated", Constant(g, "w4", {8, 16, 1, 1}, seed + 8), Constant(g, "b4", {8}, seed + 9)},
                             {"y"}));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("y"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

absl::StatusOr<Graph> ConvChainGraph(int length, uint32_t seed) {
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, 4, 6, 6}));
  std::string previous = "x";
  for (int i = 0; i < length; ++i) {
    const std::string out = i + 1 == length ? "y" : absl::StrCat("c", i);
    const std::string w = Constant(g, absl::StrCat("w", i), {4, 4, 3, 3}, seed + i);
    CONVOY_RETURN_IF_ERROR(
        g.AddNode(MakeNode(absl::StrCat("conv", i), Conv(3, 1, false, Activation::Relu()), {previous, w}, {out})));
    previous = out;
  }
  CONVOY_RETURN_IF_ERROR(g.AddOutput("y"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

absl::StatusOr<Graph> ProjectionGraph(uint32_t seed) {
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, 960, 2, 2}));
  const std::string w = Constant(g, "w", {320, 960, 1, 1}, seed);
  const std::string b = Constant(g, "b", {320}, seed + 1);
  CONVOY_RETURN_IF_ERROR(g.AddNode(
      MakeNode("project", Conv(1, 0, true, Activation{ActivationKind::kIdentity, 0, 0}), {"x", w, b}, {"y"})));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("y"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

namespace {

Activation Qdq(bool u8, float scale, int zero_point) {
  return {u8 ? ActivationKind::kQuantizeDequantizeU8 : ActivationKind::kQuantizeDequantizeS8, scale,
          static_cast<float>(zero_point)};
}

// Random INT8 weights [K, C/g, R, S] with `scales` (one, or one per output channel) dequantized into constant `name`,
// recorded as such when `annotate`; a bias `name`_b that is a random INT32 at input_scale * weight scale.
void AddQuantizedWeights(Graph& g, const std::string& name, Shape shape, const std::vector<float>& scales,
                         float input_scale, bool annotate, std::mt19937& rng) {
  std::uniform_int_distribution<int> q(-127, 127), qb(-2000, 2000);
  Tensor w = Tensor::Zeros(shape);
  const int64_t k = shape[0], per_channel = NumElements(shape) / k;
  auto scale_of = [&scales](int64_t channel) { return scales.size() == 1 ? scales[0] : scales[channel]; };
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = static_cast<float>(q(rng)) * scale_of(i / per_channel);
  Tensor b = Tensor::Zeros({k});
  for (int64_t i = 0; i < k; ++i) b.data[i] = static_cast<float>(qb(rng)) * (input_scale * scale_of(i));
  (void)g.AddConstant(name, std::move(w));
  (void)g.AddConstant(absl::StrCat(name, "_b"), std::move(b));
  if (annotate) {
    g.SetConstantQuantization(name, ConstantQuantization{true, scales.size() == 1 ? -1 : 0, scales,
                                                         std::vector<int64_t>(scales.size(), 0)});
  }
}

std::vector<float> RandomScales(int64_t count, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(count);
  for (float& v : out) v = dist(rng);
  return out;
}

}  // namespace

absl::StatusOr<Graph> QuantizedBlockGraph(uint32_t seed, bool annotate_conv_a, bool expose_b, bool expose_sum) {
  std::mt19937 rng(seed);
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, 16, 8, 8}));
  auto add = [&g](const std::string& name, NodeAttrs attrs, std::vector<std::string> in,
                  std::vector<std::string> out) { return g.AddNode(MakeNode(name, std::move(attrs), in, out)); };
  auto qdq = [&add](const std::string& name, const std::string& in, bool u8, float scale, int zero_point) {
    return add(name, ActivationAttrs{Qdq(u8, scale, zero_point)}, {in}, {absl::StrCat(in, "_q")});
  };
  const float sx = 2.0f / 255, sa = 4.0f / 255, sb = 8.0f / 255, ss = 0.06f, sc = 6.0f / 255, se = 12.0f / 255;
  CONVOY_RETURN_IF_ERROR(qdq("qdq_x", "x", true, sx, 128));
  AddQuantizedWeights(g, "wa", {32, 16, 3, 3}, RandomScales(32, 0.0015f, 0.0025f, rng), sx, annotate_conv_a, rng);
  CONVOY_RETURN_IF_ERROR(add("conv_a", Conv(3, 1, true, Activation::Relu()), {"x_q", "wa", "wa_b"}, {"a"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_a", "a", true, sa, 0));
  // One weight scale, drawn: a round one (0.004f) puts whole families of accumulators next to rounding ties.
  AddQuantizedWeights(g, "wb", {32, 32, 1, 1}, RandomScales(1, 0.0035f, 0.0045f, rng), sa, true, rng);
  CONVOY_RETURN_IF_ERROR(add("conv_b", Conv(1, 0, true, Activation{}), {"a_q", "wb", "wb_b"}, {"b"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_b", "b", true, sb, 128));
  CONVOY_RETURN_IF_ERROR(add("add", BinaryAttrs{BinaryKind::kAdd}, {"b_q", "a_q"}, {"s"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_s", "s", true, ss, 100));
  AddQuantizedWeights(g, "wc", {32, 1, 3, 3}, RandomScales(32, 0.008f, 0.012f, rng), ss, true, rng);
  Conv2dAttrs depthwise = Conv(3, 1, true, Activation::Clip(0.0f, 6.0f));
  depthwise.groups = 32;
  CONVOY_RETURN_IF_ERROR(add("conv_c", depthwise, {"s_q", "wc", "wc_b"}, {"c"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_c", "c", false, sc, -128));
  AddQuantizedWeights(g, "we", {16, 32, 1, 1}, RandomScales(16, 0.0025f, 0.0035f, rng), sc, true, rng);
  CONVOY_RETURN_IF_ERROR(add("conv_e", Conv(1, 0, true, Activation{}), {"c_q", "we", "we_b"}, {"e"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_e", "e", true, se, 128));
  AddQuantizedWeights(g, "wd", {8, 16, 1, 1}, RandomScales(8, 0.0025f, 0.0035f, rng), se, true, rng);
  CONVOY_RETURN_IF_ERROR(add("conv_d", Conv(1, 0, true, Activation{ActivationKind::kSigmoid, 0, 0}),
                             {"e_q", "wd", "wd_b"}, {"d"}));
  // Coarse enough that a one-step difference in e_q moves y by less than one of its steps (sigmoid slope <= 1/4).
  CONVOY_RETURN_IF_ERROR(qdq("qdq_d", "d", true, 4.0f / 255, 0));
  CONVOY_RETURN_IF_ERROR(add("rename_y", IdentityAttrs{}, {"d_q"}, {"y"}));
  CONVOY_RETURN_IF_ERROR(add("rename_y2", IdentityAttrs{}, {"e_q"}, {"y2"}));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("y"));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("y2"));
  if (expose_b) {
    CONVOY_RETURN_IF_ERROR(add("rename_yb", IdentityAttrs{}, {"b_q"}, {"yb"}));
    CONVOY_RETURN_IF_ERROR(g.AddOutput("yb"));
  }
  if (expose_sum) {
    CONVOY_RETURN_IF_ERROR(add("rename_ya", IdentityAttrs{}, {"a_q"}, {"ya"}));
    CONVOY_RETURN_IF_ERROR(add("rename_ys", IdentityAttrs{}, {"s_q"}, {"ys"}));
    CONVOY_RETURN_IF_ERROR(g.AddOutput("ya"));
    CONVOY_RETURN_IF_ERROR(g.AddOutput("ys"));
  }
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

absl::StatusOr<Graph> QuantizedClassifierGraph(uint32_t seed, bool transpose_b, bool quantized_logits, int height,
                                               int width) {
  std::mt19937 rng(seed);
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, 24, height, width}));
  auto add = [&g](const std::string& name, NodeAttrs attrs, std::vector<std::string> in,
                  std::vector<std::string> out) { return g.AddNode(MakeNode(name, std::move(attrs), in, out)); };
  auto qdq = [&add](const std::string& name, const std::string& in, float scale, int zero_point) {
    return add(name, ActivationAttrs{Qdq(true, scale, zero_point)}, {in}, {absl::StrCat(in, "_q")});
  };
  const float sx = 2.0f / 255, sf = 3.0f / 255, sp = 1.0f / 255, sy = 4.0f / 255;
  CONVOY_RETURN_IF_ERROR(qdq("qdq_x", "x", sx, 128));
  AddQuantizedWeights(g, "wf", {40, 24, 1, 1}, RandomScales(40, 0.004f, 0.008f, rng), sx, true, rng);
  CONVOY_RETURN_IF_ERROR(add("conv", Conv(1, 0, true, Activation::Relu()), {"x_q", "wf", "wf_b"}, {"f"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_f", "f", sf, 0));
  Pool2dAttrs pool;
  pool.kind = PoolKind::kAverage;
  pool.global = true;
  CONVOY_RETURN_IF_ERROR(add("pool", pool, {"f_q"}, {"p"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_p", "p", sp, 3));
  CONVOY_RETURN_IF_ERROR(add("flatten", FlattenAttrs{1}, {"p_q"}, {"flat"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_flat", "flat", sp, 3));
  // fc: INT8 weights drawn as [12, 40] (one scale per row), then laid out as the Gemm reads them.
  const std::vector<float> scales = RandomScales(12, 0.003f, 0.006f, rng);
  AddQuantizedWeights(g, "wy", {12, 40, 1, 1}, scales, sp, false, rng);
  Tensor& w = g.mutable_constants().at("wy");
  const std::vector<float> rows = w.data;
  w.shape = transpose_b ? Shape{12, 40} : Shape{40, 12};
  for (int64_t k = 0; k < 12; ++k) {
    for (int64_t c = 0; c < 40; ++c) w.data[transpose_b ? k * 40 + c : c * 12 + k] = rows[k * 40 + c];
  }
  g.SetConstantQuantization("wy", ConstantQuantization{true, transpose_b ? 0 : 1, scales, std::vector<int64_t>(12)});
  GemmAttrs gemm;
  gemm.transpose_b = transpose_b;
  gemm.has_bias = true;
  CONVOY_RETURN_IF_ERROR(add("fc", gemm, {"flat_q", "wy", "wy_b"}, {"logits"}));
  if (quantized_logits) {
    CONVOY_RETURN_IF_ERROR(qdq("qdq_y", "logits", sy, 128));
    CONVOY_RETURN_IF_ERROR(add("rename_y", IdentityAttrs{}, {"logits_q"}, {"y"}));
  } else {
    CONVOY_RETURN_IF_ERROR(add("rename_y", IdentityAttrs{}, {"logits"}, {"y"}));
  }
  CONVOY_RETURN_IF_ERROR(g.AddOutput("y"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

absl::StatusOr<Graph> QuantizedMaxPoolGraph(uint32_t seed, float pool_output_scale) {
  std::mt19937 rng(seed);
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, 8, 11, 13}));
  auto add = [&g](const std::string& name, NodeAttrs attrs, std::vector<std::string> in,
                  std::vector<std::string> out) { return g.AddNode(MakeNode(name, std::move(attrs), in, out)); };
  auto qdq = [&add](const std::string& name, const std::string& in, float scale, int zero_point) {
    return add(name, ActivationAttrs{Qdq(true, scale, zero_point)}, {in}, {absl::StrCat(in, "_q")});
  };
  const float sx = 2.0f / 255, sf = 3.0f / 255, sy = 4.0f / 255;
  CONVOY_RETURN_IF_ERROR(qdq("qdq_x", "x", sx, 128));
  AddQuantizedWeights(g, "wf", {24, 8, 3, 3}, RandomScales(24, 0.004f, 0.008f, rng), sx, true, rng);
  CONVOY_RETURN_IF_ERROR(add("conv", Conv(3, 1, true, Activation::Relu()), {"x_q", "wf", "wf_b"}, {"f"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_f", "f", sf, 0));
  Pool2dAttrs pool;
  pool.kind = PoolKind::kMax;
  pool.window = Window2d{3, 3, 2, 2, 1, 1, 1, 1, 1, 1};
  CONVOY_RETURN_IF_ERROR(add("pool", pool, {"f_q"}, {"p"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_p", "p", pool_output_scale > 0.0f ? pool_output_scale : sf, 0));
  AddQuantizedWeights(g, "wy", {16, 24, 1, 1}, RandomScales(16, 0.004f, 0.008f, rng), sf, true, rng);
  CONVOY_RETURN_IF_ERROR(add("conv_y", Conv(1, 0, true, Activation{}), {"p_q", "wy", "wy_b"}, {"logits"}));
  CONVOY_RETURN_IF_ERROR(qdq("qdq_y", "logits", sy, 128));
  CONVOY_RETURN_IF_ERROR(add("rename_y", IdentityAttrs{}, {"logits_q"}, {"y"}));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("y"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

}  // namespace convoy::runtime::testing
