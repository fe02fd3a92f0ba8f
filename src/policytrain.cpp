// policytrain::compiled: the one translation unit of separate compilation (include/policytrain/detail/config.hpp).
#include <policytrain/src.hpp>
