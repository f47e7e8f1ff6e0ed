// The C++ API, the same for Python (through python/bindings.cpp) and for C++
// programs that load a TorchScript model: turn the fusion pass on and off.
#pragma once

namespace fuser {

// Registers the pass with TorchScript (torch::jit::registerPrePass) for graphs
// optimized from now on, and turns NNC off while active. No-op under FUSER_DISABLE=1.
void enable();
// Clears the pass and restores NNC's previous state.
void disable();
bool isEnabled();

// Most inputs + outputs one group may have. Throws std::invalid_argument for n < 2.
void setArgLimit(int n);
int getArgLimit();

}  // namespace fuser
