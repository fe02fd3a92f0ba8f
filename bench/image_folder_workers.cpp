// The C++ side of bench/image_folder_workers.py: samples/s reading an image folder (decode, resize of the shorter
// side, centre crop, per-channel normalisation: data::ImageFolder) one epoch at a time, through
// data::PrefetchLoader (the folder's get in its workers) and through LibTorch's DataLoader (what data::from_torch
// wraps), with 0, 1 and 2 workers. One JSON line per (loader, workers): the median of --reps epochs.
// Usage: image_folder_workers ROOT [--size S] [--batch B] [--reps R] [--workers 0,1,2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <policytrain/data.hpp>
#include <policytrain/data/image_folder.hpp>  // link policytrain::images

namespace pd = policytrain::data;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
template <class F>
double epoch_rate(F&& epoch, int reps) {
  std::vector<double> rates;
  for (int r = 0; r < reps + 1; ++r) {  // the first epoch starts the workers and warms the page cache: not counted
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t n = epoch(r);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) rates.push_back(static_cast<double>(n) / s);
  }
  return median(rates);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: image_folder_workers ROOT [--size S] [--batch B] [--reps R]\n");
    return 2;
  }
  const std::string root = argv[1];
  int64_t size = 64, batch = 32;
  int reps = 3;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--size") size = std::atoll(argv[i + 1]);
    else if (a == "--batch") batch = std::atoll(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "image_folder_workers: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const pd::ImageFolderOptions o{.resize = size, .crop = size, .mean = {0.485, 0.456, 0.406}, .std = {0.229, 0.224, 0.225}};
  for (int64_t workers : {0, 1, 2}) {
    {
      pd::PrefetchLoader l(pd::ImageFolder(root, o), {.batch_size = batch, .shuffle = true, .seed = 1},
                           {.workers = workers, .prefetch = 2});
      const double rate = epoch_rate([&](int r) {
        l.set_epoch(r);
        int64_t n = 0;
        for (auto&& b : l) n += b.x.size(0);
        return n;
      }, reps);
      std::printf("{\"impl\": \"policytrain PrefetchLoader(ImageFolder)\", \"workers\": %lld, \"samples_per_s\": %.1f}\n",
                  static_cast<long long>(workers), rate);
    }
    {
      pd::ImageFolder folder(root, o);
      const size_t n_all = *folder.size();
      auto loader = torch::data::make_data_loader(
          folder.map(torch::data::transforms::Stack<>()), torch::data::samplers::RandomSampler(n_all),
          torch::data::DataLoaderOptions().batch_size(static_cast<size_t>(batch)).workers(static_cast<size_t>(workers)));
      const double rate = epoch_rate([&](int) {
        int64_t n = 0;
        for (auto& b : *loader) n += b.data.size(0);
        return n;
      }, reps);
      std::printf("{\"impl\": \"LibTorch DataLoader(ImageFolder) (data::from_torch)\", \"workers\": %lld, \"samples_per_s\": %.1f}\n",
                  static_cast<long long>(workers), rate);
    }
    std::fflush(stdout);
  }
  return 0;
}
