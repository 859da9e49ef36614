// The two op lists of mixed precision: ops that always run in the low-precision type and ops that
// always run in fp32. Defaults follow Habana's HMP (amp-bf16) and PyTorch autocast (amp-fp16);
// users replace either list with a file of op names (one a line, # comments, blank lines).
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mptrain {

using OpSet = std::set<std::string, std::less<>>;

struct OpLists {
  OpSet low_precision;  // the "bf16 list" (also used for fp16 in amp-fp16)
  OpSet fp32;
};

// HMP's default bf16 and fp32 lists.
OpLists hmp_default_lists();

// The conv/matmul ops autocast runs in fp16 and the ops it keeps in fp32 (softmax, log_softmax,
// norms, losses, reductions).
OpLists autocast_fp16_default_lists();

// Every op name a list may hold: the names of both default sets and the trainer's own ops.
const OpSet& known_op_names();

// Reads an op list file. Throws UsageError naming the file (and line) when it cannot be read or
// holds a name not in known_op_names().
OpSet read_op_list_file(const std::string& path);

// Parses the text of an op list; `origin` names it in errors.
OpSet parse_op_list(std::string_view text, const std::string& origin);

// The entries of a list file, each with its line number: one a line, text after '#' and blank
// lines ignored, surrounding blanks trimmed.
std::vector<std::pair<int, std::string>> list_file_entries(std::string_view text);
// A file of layer names in that form (--fp8-keep-bf16 @FILE); throws UsageError naming the file
// and `option` when it cannot be read.
std::set<std::string> read_layer_list_file(const std::string& path, const char* option);

// "a, b, c" for logs.
std::string join_ops(const OpSet& ops);

}  // namespace mptrain
