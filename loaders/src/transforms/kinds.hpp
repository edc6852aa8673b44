#pragma once
// The built-in transforms' registrations, one function per file (internal). A new transform is a
// new file with its class, its public factory and an add_*_kinds function, plus one line in
// builtin_kinds() (pipeline.cpp).

#include <vector>

#include "pinfeed/loaders/transforms.hpp"

namespace pinfeed::loaders {

void add_crop_kinds(std::vector<transform_kind>& kinds);
void add_resize_kinds(std::vector<transform_kind>& kinds);
void add_random_resized_crop_kinds(std::vector<transform_kind>& kinds);
void add_random_mask_kinds(std::vector<transform_kind>& kinds);
void add_random_hflip_kinds(std::vector<transform_kind>& kinds);
void add_pointwise_kinds(std::vector<transform_kind>& kinds);
void add_colour_kinds(std::vector<transform_kind>& kinds);
void add_blur_kinds(std::vector<transform_kind>& kinds);
void add_geometry_kinds(std::vector<transform_kind>& kinds);
void add_policy_kinds(std::vector<transform_kind>& kinds);
void add_erasing_kinds(std::vector<transform_kind>& kinds);
void add_mix_kinds(std::vector<transform_kind>& kinds);

}  // namespace pinfeed::loaders
