// Default op lists and the parser for user list files (see op_lists.h).
#include "op_lists.h"

#include "errors.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace mptrain {

OpLists hmp_default_lists() {
  return {
      {"addmm", "batch_norm", "bmm", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
       "conv_transpose2d", "conv_transpose3d", "dot", "dropout", "dropout1d", "dropout2d",
       "dropout3d", "group_norm", "instance_norm", "layer_norm", "leaky_relu", "linear", "matmul",
       "mm", "mul", "mv", "relu", "t"},
      {"binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "div",
       "divide", "embedding", "embedding_bag", "log", "log2", "log_softmax", "nll_loss",
       "smooth_l1_loss", "softmax", "topk", "truediv"},
  };
}

OpLists autocast_fp16_default_lists() {
  return {
      {"addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "conv1d", "conv2d",
       "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "linear",
       "matmul", "mm", "mv", "prelu"},
      {"acos", "asin", "binary_cross_entropy_with_logits", "cosh", "cosine_embedding_loss",
       "cosine_similarity", "cross_entropy", "cumprod", "cumsum", "dist", "erfinv", "exp",
       "expm1", "group_norm", "hinge_embedding_loss", "huber_loss", "kl_div", "l1_loss",
       "layer_norm", "log", "log10", "log1p", "log2", "log_softmax", "logsumexp",
       "margin_ranking_loss", "mse_loss", "multi_margin_loss", "multilabel_margin_loss",
       "nll_loss", "norm", "pdist", "poisson_nll_loss", "pow", "prod", "reciprocal", "rsqrt",
       "sinh", "smooth_l1_loss", "soft_margin_loss", "softmax", "softplus", "sum", "tan",
       "triplet_margin_loss"},
  };
}

const OpSet& known_op_names() {
  static const OpSet names = [] {
    OpSet all = {"max_pool2d", "avg_pool2d", "flatten"};
    for (const OpLists& lists : {hmp_default_lists(), autocast_fp16_default_lists()}) {
      all.insert(lists.low_precision.begin(), lists.low_precision.end());
      all.insert(lists.fp32.begin(), lists.fp32.end());
    }
    return all;
  }();
  return names;
}

std::vector<std::pair<int, std::string>> list_file_entries(std::string_view text) {
  std::vector<std::pair<int, std::string>> entries;
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    auto last = line.find_last_not_of(" \t\r");
    entries.emplace_back(number, line.substr(first, last - first + 1));
  }
  return entries;
}

namespace {

std::string read_whole_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("{}: cannot read {}", path, what));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

OpSet parse_op_list(std::string_view text, const std::string& origin) {
  OpSet ops;
  for (auto& [number, name] : list_file_entries(text)) {
    if (known_op_names().count(name) == 0) {
      throw UsageError(fmt::format("{}:{}: unknown op name '{}' (known ops: {})", origin, number,
                                   name, join_ops(known_op_names())));
    }
    ops.insert(std::move(name));
  }
  return ops;
}

OpSet read_op_list_file(const std::string& path) {
  return parse_op_list(read_whole_file(path, "op list file"), path);
}

std::set<std::string> read_layer_list_file(const std::string& path, const char* option) {
  std::set<std::string> layers;
  for (auto& entry : list_file_entries(read_whole_file(path, fmt::format("{} file", option))))
    layers.insert(std::move(entry.second));
  return layers;
}

std::string join_ops(const OpSet& ops) {
  std::string joined;
  for (const std::string& op : ops) {
    if (!joined.empty()) joined += ", ";
    joined += op;
  }
  return joined;
}

}  // namespace mptrain
