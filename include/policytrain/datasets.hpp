#pragma once
/// \file
/// Data sets on disk, opt-in (not in the cheap <policytrain/policytrain.hpp>): IDX files (data::read_idx, with
/// gzip) and Fashion-MNIST (data::FashionMnist).
#include <policytrain/policytrain.hpp>

#include <policytrain/data/fashion_mnist.hpp>
#include <policytrain/data/idx.hpp>
#include <policytrain/data/idx_format.hpp>
