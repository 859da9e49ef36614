// Runs an independent Python reference over test tensors: writes each tensor's raw bytes to a
// file, lists them in a JSON manifest (with any fields of the test's own), runs the script once and
// returns its JSON results by tensor name. The results are kept in the build folder under a
// fingerprint of the tensors, the manifest, the script and the Python that runs it, so that the
// test cases of one binary (which ctest runs as separate, possibly parallel processes) run the
// reference once.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "temp_path.h"
#include "test_tensors.h"

namespace fpscope::stats_test {

// A tensor for the reference and the manifest fields it needs beside "name", "dtype" and "file".
struct ReferenceInput {
  const TestTensor* tensor;
  nlohmann::json fields = nlohmann::json::object();
};

inline nlohmann::json run_reference_script(const std::vector<ReferenceInput>& inputs, const std::string& python,
                                           const std::string& script, const std::filesystem::path& work) {
  namespace fs = std::filesystem;
  using Json = nlohmann::json;
  std::ifstream script_file(script);
  const std::string text((std::istreambuf_iterator<char>(script_file)), std::istreambuf_iterator<char>());
  uint64_t h = std::hash<std::string>{}(text) ^ std::hash<std::string>{}(python);
  for (const ReferenceInput& in : inputs) {
    const TestTensor& t = *in.tensor;
    h = h * 1000003u ^ std::hash<std::string>{}(t.name + in.fields.dump());
    h = h * 1000003u ^ std::hash<std::string_view>{}(std::string_view(
                           reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size()));
  }
  const fs::path cached = work / (fs::path(script).stem().string() + "-" + std::to_string(h) + ".json");
  if (fs::exists(cached)) return Json::parse(std::ifstream(cached));
  fs::create_directories(work);
  const fpscope::test::TempDir scratch(work, "reference");
  const fs::path& dir = scratch.path();
  Json manifest = Json::array();
  for (const ReferenceInput& in : inputs) {
    const TestTensor& t = *in.tensor;
    const fs::path file = dir / (t.name + ".bin");
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
    Json entry = in.fields;
    entry["name"] = t.name;
    entry["dtype"] = type_name(t.type);
    entry["file"] = file.string();
    manifest.push_back(entry);
  }
  std::ofstream(dir / "manifest.json") << manifest.dump();
  const std::string cmd = python + " " + script + " " + (dir / "manifest.json").string() + " " +
                          (dir / "reference.json").string();
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "reference failed: " << cmd;
    return Json::object();
  }
  Json result = Json::parse(std::ifstream(dir / "reference.json"));
  fs::rename(dir / "reference.json", cached);  // atomic: a parallel reader sees all or nothing
  fs::remove_all(dir);
  return result;
}

}  // namespace fpscope::stats_test
