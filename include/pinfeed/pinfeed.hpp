#pragma once
/// @file pinfeed.hpp
/// Everything a trainer needs: the loader, the built-in sources and the device ops.

#include "pinfeed/config.hpp"
#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/batch.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/source.hpp"
#include "pinfeed/version.hpp"
