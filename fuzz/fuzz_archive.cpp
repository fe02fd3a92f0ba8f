// libFuzzer target: the archive loader (checkpoint/archive.hpp): read_payload parses a LibTorch archive
// (torch::serialize::InputArchive: zip container, pickle, tensors) and validates it against a live model,
// optimizer and Trainer state. The input is the payload itself (the file layer's checksums would stop the
// fuzzer at the CRC otherwise; fuzz_checkpoint_header covers that layer). Allowed failure: CheckpointError.
// LibTorch itself is not instrumented: coverage counts only policytrain's code and LibTorch's inline headers.
// With POLICYTRAIN_FUZZ_SEEDS=<dir> set, writes valid inputs there (plain, half weights, half optimizer).
// Input layout: one byte of metadata flags (bit 0 half_weights, bit 1 half_optimizer), then the payload.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <policytrain/checkpoint/archive.hpp>

namespace ck = policytrain::checkpoint;

namespace {
struct Live {
  torch::nn::Linear net{torch::nn::LinearOptions(3, 2)};
  std::unique_ptr<torch::optim::SGD> opt;
  policytrain::StateDict state;
  Live() {
    opt = std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    // One step so that the optimizer has momentum buffers.
    net->forward(torch::ones({1, 3})).sum().backward();
    opt->step();
    state = {{"trainer/global_step", policytrain::scalar_tensor(int64_t{1})}, {"trainer/epoch", policytrain::scalar_tensor(int64_t{0})}};
  }
};
Live* g_live = nullptr;

void make_seeds(const std::string& dir) {
  int i = 0;
  for (ck::SaveOptions o : {ck::SaveOptions{}, ck::SaveOptions{.half_weights = true}, ck::SaveOptions{true, true}}) {
    const char flags = static_cast<char>((o.half_weights ? 1 : 0) | (o.half_optimizer ? 2 : 0));
    std::ofstream(dir + "/payload-" + std::to_string(i++), std::ios::binary)
        << flags << ck::make_payload(*g_live->net, *g_live->opt, g_live->state, o);
  }
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::manual_seed(0);
  g_live = new Live;
  if (const char* d = std::getenv("POLICYTRAIN_FUZZ_SEEDS")) {
    make_seeds(d);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte holds the metadata's half_weights (bit 0) and half_optimizer (bit 1); the rest is the payload.
  if (size == 0) return 0;
  ck::RawFile raw;
  raw.bytes.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  raw.payload_offset = 0;
  raw.meta = {{"half_weights", (data[0] & 1) != 0}, {"half_optimizer", (data[0] & 2) != 0}};
  try {
    (void)ck::read_payload(raw, "fuzz-input.ckpt", *g_live->net, *g_live->opt, g_live->state);
  } catch (const ck::CheckpointError&) {
  }
  return 0;
}
