// convoy_model_tool: loads a model file (.onnx, or a Convoy .yaml graph) the way the server does and either prints
// the graph or evaluates it with the reference interpreter. Used by the Python tests that compare Convoy against
// onnxruntime, and by people inspecting a model.
//
//   convoy_model_tool inspect model.onnx [--no-optimize]
//   convoy_model_tool run model.onnx --input images=in.bin:2x3x64x64 --output_dir out/ [--no-optimize]
//
// Tensors travel as raw little-endian float32 files; `run` writes <output_dir>/<index>.bin per graph output and
// <output_dir>/outputs.txt with one "index name dims" line each.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/common/status_macros.h"
#include "server/repository/model_loader.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::repository {
namespace {

struct ToolArgs {
  std::string command, model;
  bool optimize = true;
  std::string output_dir;
  std::vector<std::string> inputs;
};

absl::StatusOr<ToolArgs> ParseArgs(int argc, char** argv) {
  if (argc < 3) return absl::InvalidArgumentError("usage: convoy_model_tool inspect|run MODEL [options]");
  ToolArgs args{argv[1], argv[2]};
  for (int i = 3; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--no-optimize") {
      args.optimize = false;
    } else if ((arg == "--input" || arg == "--output_dir") && i + 1 < argc) {
      (arg == "--input" ? args.inputs.emplace_back() : args.output_dir) = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", arg, "'"));
    }
  }
  return args;
}

// "name=path:2x3x8x8" -> a tensor read from path.
absl::StatusOr<std::pair<std::string, runtime::Tensor>> ReadInput(const std::string& spec) {
  std::vector<std::string> name_rest = absl::StrSplit(spec, absl::MaxSplits('=', 1));
  std::vector<std::string> path_dims = absl::StrSplit(name_rest.back(), ':');
  if (name_rest.size() != 2 || path_dims.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("--input '", spec, "' is not name=path:dims"));
  }
  runtime::Tensor t;
  for (const auto& d : absl::StrSplit(path_dims[1], 'x')) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v) || v <= 0) return absl::InvalidArgumentError(absl::StrCat("bad dims in '", spec, "'"));
    t.shape.push_back(v);
  }
  t.data.resize(runtime::NumElements(t.shape));
  std::ifstream file(path_dims[0], std::ios::binary);
  file.read(reinterpret_cast<char*>(t.data.data()), static_cast<std::streamsize>(t.data.size() * sizeof(float)));
  if (!file || file.gcount() != static_cast<std::streamsize>(t.data.size() * sizeof(float))) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", t.data.size(), " floats from '", path_dims[0], "'"));
  }
  return std::make_pair(name_rest[0], std::move(t));
}

absl::Status RunTool(const ToolArgs& args) {
  LoadGraphOptions options;
  options.optimize = args.optimize;
  CONVOY_ASSIGN_OR_RETURN(LoadedGraph loaded, LoadGraphFile(args.model, options));
  if (args.command == "inspect") {
    std::cout << loaded.graph.ToString();
    if (args.optimize) std::cout << "optimizations: " << loaded.stats.ToString() << "\n";
    return absl::OkStatus();
  }
  if (args.command != "run") return absl::InvalidArgumentError(absl::StrCat("unknown command '", args.command, "'"));
  std::map<std::string, runtime::Tensor> inputs;
  for (const std::string& spec : args.inputs) {
    CONVOY_ASSIGN_OR_RETURN(auto input, ReadInput(spec));
    inputs.insert(std::move(input));
  }
  CONVOY_ASSIGN_OR_RETURN(auto outputs, runtime::RunReference(loaded.graph, inputs));
  std::ofstream index(args.output_dir + "/outputs.txt");
  for (size_t i = 0; i < loaded.graph.outputs().size(); ++i) {
    const std::string& name = loaded.graph.outputs()[i];
    const runtime::Tensor& t = outputs.at(name);
    std::ofstream out(absl::StrCat(args.output_dir, "/", i, ".bin"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size() * sizeof(float)));
    index << i << " " << name;
    for (int64_t d : t.shape) index << " " << d;
    index << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write output ", i, " to '", args.output_dir, "'"));
  }
  return index ? absl::OkStatus() : absl::InternalError("cannot write outputs.txt");
}

}  // namespace
}  // namespace convoy::repository

int main(int argc, char** argv) {
  auto args = convoy::repository::ParseArgs(argc, argv);
  absl::Status status = args.ok() ? convoy::repository::RunTool(*args) : args.status();
  if (!status.ok()) {
    std::cerr << "convoy_model_tool: " << status << "\n";
    return 1;
  }
  return 0;
}
