// Where aten::scaled_dot_product_attention's inputs lie, for the passes that rewrite its
// mask (attention_masks.cpp, attention_masks_once.cpp).
#pragma once

#include <cstddef>

namespace fuser {

// query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa
inline constexpr size_t kAttentionMaskInput = 3;
inline constexpr size_t kAttentionInputs = 8;

}  // namespace fuser
