//===- Analyze.cpp - switchyard analyze -----------------------------------===//
//
// `switchyard analyze MODEL.mlir --params FILE (--text TEXT | --data FILE
// --offset N) --out DIR`: runs one window of text (bytes, or the subwords
// of --tokenizer-model) through a trained model compiled with probes
// (runtime/Analysis.h) and writes what it computed on the way: per attention
// block the attention map (the maximum over heads, as the paper's figures draw
// it, and each head with
// --per-head), per router the experts each token chose with their gates,
// as SVG pictures and one index.html that shows them, and as JSON
// (analysis.json) for other tools. --compare draws a second model (a dense
// baseline) beside the first on the same text.
//
//===----------------------------------------------------------------------===//

#include "tools/switchyard/AnalysisPictures.h"
#include "tools/switchyard/Commands.h"
#include "tools/switchyard/Common.h"

#include "runtime/Analysis.h"
#include "runtime/Training.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace switchyard::driver {
namespace {

namespace json = llvm::json;

/// One analysed model: where its pictures go and what they show.
struct Analysed {
  std::string path, folder;
  rt::WindowAnalysis window;
  /// Each token's label on the pictures' axes: a byte as tokenLabel draws
  /// it, or a subword's piece.
  std::vector<std::string> labels;
};

llvm::Error writeFile(const std::string &path, const std::string &text) {
  std::error_code error;
  llvm::raw_fd_ostream out(path, error);
  if (error)
    return llvm::createStringError(error, "cannot write " + path + ": " +
                                              error.message());
  out << text;
  return llvm::Error::success();
}

/// The labels of the keys a block's map shows: "·" for each memory token
/// (zeros: the window is the text's first segment), then the tokens.
std::vector<std::string> keyLabels(const Analysed &model, int64_t memory) {
  std::vector<std::string> labels(size_t(memory), "\u00b7");
  labels.insert(labels.end(), model.labels.begin(), model.labels.end());
  return labels;
}

json::Array rows(std::span<const float> values, int64_t rows, int64_t columns) {
  json::Array out;
  for (int64_t r = 0; r < rows; ++r) {
    json::Array row;
    for (int64_t c = 0; c < columns; ++c)
      row.push_back(values[r * columns + c]);
    out.push_back(std::move(row));
  }
  return out;
}

/// Writes one model's pictures into DIR/<folder>; returns its JSON and
/// puts its pictures' HTML, block by block, in column `column` of `cells`
/// (a row per block, a column per model).
llvm::Expected<json::Object>
writeModel(const Analysed &model, const std::string &out, bool perHead,
           size_t column, size_t columns,
           std::vector<std::vector<std::string>> &cells) {
  std::string folder = out + "/" + model.folder;
  if (std::error_code error = llvm::sys::fs::create_directories(folder))
    return llvm::createStringError(error, "cannot create " + folder);
  const rt::WindowAnalysis &window = model.window;
  const std::vector<std::string> &queries = model.labels;
  json::Array text, tokens;
  for (auto [token, label] : llvm::zip_equal(window.tokens, model.labels)) {
    text.push_back(label);
    tokens.push_back(token);
  }
  json::Array blocks;
  for (auto [index, block] : llvm::enumerate(window.blocks)) {
    if (cells.size() <= index)
      cells.emplace_back(columns);
    std::string html;
    json::Object entry{{"name", block.name}};
    auto picture = [&](const std::string &file,
                       const std::string &svg) -> llvm::Error {
      if (llvm::Error error = writeFile(folder + "/" + file, svg))
        return error;
      html += "<img src=\"" + model.folder + "/" + file + "\">\n";
      return llvm::Error::success();
    };
    if (!block.weights.empty()) {
      int64_t memory = block.keys - block.queries;
      std::vector<std::string> keys = keyLabels(model, memory);
      std::vector<float> maxima = block.maxOverHeads();
      if (llvm::Error error = picture(
              block.name + ".attention.svg",
              heatMap(block.name + ": attention, max over " +
                          std::to_string(block.heads) + " heads",
                      maxima, block.queries, block.keys, queries, keys)))
        return std::move(error);
      entry["heads"] = block.heads;
      entry["queries"] = block.queries;
      entry["keys"] = block.keys;
      entry["attention_max"] = rows(maxima, block.queries, block.keys);
      if (perHead) {
        json::Array heads;
        int64_t size = block.queries * block.keys;
        for (int64_t h = 0; h < block.heads; ++h) {
          std::span<const float> head(block.weights.data() + h * size,
                                      size_t(size));
          if (llvm::Error error = picture(
                  block.name + ".attention.head" + std::to_string(h) + ".svg",
                  heatMap(block.name + ": attention, head " + std::to_string(h),
                          head, block.queries, block.keys, queries, keys)))
            return std::move(error);
          heads.push_back(rows(head, block.queries, block.keys));
        }
        entry["attention"] = std::move(heads);
      }
    }
    if (!block.selections.empty()) {
      json::Array selections;
      int64_t memory = 0;
      for (const rt::Selection &s : block.selections) {
        memory = std::max(memory, s.tokens - int64_t(window.tokens.size()));
        json::Array chosen, gates;
        for (int64_t t = 0; t < s.tokens; ++t) {
          json::Array tokenChosen, tokenGates;
          for (int64_t h = 0; h < s.heads; ++h) {
            json::Array headChosen, headGates;
            for (int64_t j = 0; j < s.k; ++j) {
              int64_t at = (t * s.heads + h) * s.k + j;
              headChosen.push_back(s.chosen[at]);
              headGates.push_back(s.gates[at]);
            }
            tokenChosen.push_back(std::move(headChosen));
            tokenGates.push_back(std::move(headGates));
          }
          chosen.push_back(std::move(tokenChosen));
          gates.push_back(std::move(tokenGates));
        }
        selections.push_back(json::Object{{"side", s.side},
                                          {"tokens", s.tokens},
                                          {"heads", s.heads},
                                          {"k", s.k},
                                          {"experts", s.experts},
                                          {"chosen", std::move(chosen)},
                                          {"gates", std::move(gates)}});
      }
      if (llvm::Error error = picture(
              block.name + ".experts.svg",
              selectionGrid(block.name + ": experts chosen (colour: gate)",
                            block.selections, keyLabels(model, memory))))
        return std::move(error);
      entry["selections"] = std::move(selections);
    }
    cells[index][column] = html;
    blocks.push_back(std::move(entry));
  }
  return json::Object{{"model", model.path},
                      {"tokens", std::move(tokens)},
                      {"text", std::move(text)},
                      {"memory", window.memory},
                      {"blocks", std::move(blocks)}};
}

} // namespace

int runAnalyze(int argc, char **argv) {
  static ModelOptions model;
  static TrainedParams params(model.category);
  static cl::opt<std::string> text(
      "text",
      cl::desc("The text to analyse (at most the model's context in bytes, "
               "or in subwords with --tokenizer-model)"),
      cl::cat(model.category));
  static cl::opt<std::string> data(
      "data",
      cl::desc("Analyse a window of this file's text instead of --text"),
      cl::value_desc("file"), cl::cat(model.category));
  static cl::opt<uint64_t> offset(
      "offset", cl::desc("With --data: where the window starts (byte; 0)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<int64_t> length(
      "length",
      cl::desc("With --data: the window's bytes (0: the model's context in "
               "tokens, bytes or subwords)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<std::string> out(
      "out",
      cl::desc("The folder for analysis.json, index.html and the pictures"),
      cl::value_desc("dir"), cl::Required, cl::cat(model.category));
  static cl::opt<bool> perHead(
      "per-head",
      cl::desc("Also draw (and write to the JSON) each head's attention map"),
      cl::init(false), cl::cat(model.category));
  static cl::opt<std::string> compare(
      "compare",
      cl::desc("A second model (e.g. the dense baseline) to analyse on the "
               "same text and draw beside the first"),
      cl::value_desc("model.mlir"), cl::cat(model.category));
  static cl::list<std::string> compareParams(
      "compare-params", cl::desc("The second model's parameters (repeatable)"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static DeviceOption device(model.category);
  registerCommandOptions(model.category, {&device.gpuCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard analyze: what a trained model computes on a window of "
      "text\n(bytes, or with --tokenizer-model the subwords of the "
      "checkpoint's\nSentencePiece model).\nWrites to --out, per attention "
      "block, the attention "
      "map (the maximum over\nheads; each head with --per-head) and, per "
      "router (SwitchHead's value and\noutput sides, sigma-MoE), the experts "
      "each token chose with their gates: SVG\npictures, an index.html that "
      "shows them (a --compare model beside the\nfirst), and analysis.json. "
      "A Transformer-XL model sees the window as the\ntext's first segment "
      "(zero memories).\n");
  if (text.getNumOccurrences() == data.getNumOccurrences())
    return fail("give the text to analyse with either --text or --data");
  if (compare.empty() != compareParams.empty())
    return fail("--compare and --compare-params go together");
  llvm::Expected<rt::ParamFileOptions> fileOptions = params.flags.options(0);
  if (!fileOptions)
    return fail(fileOptions.takeError());
  llvm::Expected<std::unique_ptr<rt::SentencePieceTokenizer>> read =
      params.loadTokenizer();
  if (!read)
    return fail(read.takeError());
  std::unique_ptr<rt::SentencePieceTokenizer> subwords = std::move(*read);
  llvm::StringRef unit = subwords ? "subwords" : "bytes";

  std::vector<Analysed> models;
  std::vector<std::string> inputs = {model.input};
  std::vector<std::vector<std::string>> paramFiles = {
      std::vector<std::string>(params.files.begin(), params.files.end())};
  if (!compare.empty()) {
    inputs.push_back(compare);
    paramFiles.emplace_back(compareParams.begin(), compareParams.end());
  }
  std::vector<int32_t> window;
  for (auto [input, files] : llvm::zip_equal(inputs, paramFiles)) {
    CompileRequest request;
    request.probes = true;
    request.input = input;
    llvm::Expected<std::unique_ptr<rt::Program>> compiled =
        compileFor(device, model, request);
    if (!compiled)
      return fail(compiled.takeError());
    std::vector<rt::HostTensor> loaded;
    llvm::Expected<rt::LanguageModel> language =
        bindLanguageModel(**compiled, input, files, *fileOptions, loaded,
                          "analyze", subwords.get());
    if (!language)
      return fail(language.takeError());
    if (window.empty()) {
      std::string bytes = text;
      if (!data.empty()) {
        llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
            llvm::MemoryBuffer::getFile(data);
        if (!file)
          return fail("cannot read " + data + ": " + file.getError().message());
        llvm::StringRef all = (*file)->getBuffer();
        if (offset >= all.size())
          return fail(llvm::formatv("--offset {0}: {1} holds {2} bytes",
                                    uint64_t(offset), std::string(data),
                                    all.size())
                          .str());
        // A context of bytes, or of subwords (a few bytes each: the
        // encoded window is cut to the context).
        int64_t count = length > 0 ? int64_t(length)
                                   : language->context * (subwords ? 8 : 1);
        bytes = all.substr(offset, count).str();
      }
      if (bytes.empty())
        return fail("the text to analyse is empty");
      if (subwords) {
        llvm::Expected<std::vector<int32_t>> encoded =
            subwords->encodeText(bytes);
        if (!encoded)
          return fail(encoded.takeError());
        window = std::move(*encoded);
        if (!data.empty() && length == 0 &&
            static_cast<int64_t>(window.size()) > language->context)
          window.resize(size_t(language->context));
        if (window.empty())
          return fail("the tokenizer made no tokens of the text");
      } else {
        for (unsigned char byte : bytes)
          window.push_back(byte);
      }
    }
    if (static_cast<int64_t>(window.size()) > language->context)
      return fail(llvm::formatv("the text is {0} {1}; {2}'s context holds "
                                "{3} (analyze reads one window)",
                                window.size(), unit, input, language->context)
                      .str());
    llvm::Expected<rt::WindowAnalysis> analysis =
        rt::analyzeWindow(*language, window);
    if (!analysis)
      return fail(analysis.takeError());
    std::string folder = llvm::sys::path::stem(input).str();
    if (!models.empty() && models.front().folder == folder)
      folder += "-compare";
    std::vector<std::string> labels;
    for (int32_t token : window)
      labels.push_back(subwords ? subwords->piece(token) : tokenLabel(token));
    models.push_back({input, folder, std::move(*analysis), std::move(labels)});
  }

  if (std::error_code error = llvm::sys::fs::create_directories(out))
    return fail("cannot create " + out + ": " + error.message());
  std::vector<std::vector<std::string>> cells;
  json::Array analyses;
  for (auto [column, analysed] : llvm::enumerate(models)) {
    llvm::Expected<json::Object> entry =
        writeModel(analysed, out, perHead, column, models.size(), cells);
    if (!entry)
      return fail(entry.takeError());
    analyses.push_back(std::move(*entry));
  }
  std::string jsonText;
  llvm::raw_string_ostream jsonStream(jsonText);
  jsonStream << llvm::formatv(
      "{0:1}", json::Value(json::Object{{"models", std::move(analyses)}}));
  if (llvm::Error error = writeFile(out + "/analysis.json", jsonText + "\n"))
    return fail(std::move(error));

  // One row per block, a column per model.
  std::string html =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>switchyard "
      "analyze</title>\n<style>body{font-family:sans-serif} td{vertical-align:"
      "top; padding:8px} img{display:block; margin-bottom:8px}</style>"
      "</head><body>\n<table>\n<tr>";
  for (const Analysed &analysed : models)
    html += "<th>" + analysed.path + "</th>";
  html += "</tr>\n";
  for (const std::vector<std::string> &row : cells) {
    html += "<tr>";
    for (const std::string &cell : row)
      html += "<td>" + cell + "</td>";
    html += "</tr>\n";
  }
  html += "</table>\n</body></html>\n";
  if (llvm::Error error = writeFile(out + "/index.html", html))
    return fail(std::move(error));
  llvm::errs() << llvm::formatv("analysed {0} tokens with {1} model{2}: {3}/"
                                "index.html, {3}/analysis.json\n",
                                window.size(), models.size(),
                                models.size() == 1 ? "" : "s",
                                std::string(out));
  return 0;
}

} // namespace switchyard::driver
